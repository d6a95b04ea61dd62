package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/pollux-dev/pollux/internal/tools/bench"
)

// BenchCmd is `pollux bench`.
type BenchCmd struct {
	Bin         string        `name:"bin" env:"POLLUX_BENCH_BIN" default:"bin" help:"Directory holding the nats-server and poller binaries (make bench builds them)."`
	Window      time.Duration `name:"window" env:"POLLUX_BENCH_WINDOW" default:"10s" help:"How long each rate is measured."`
	Jobs        int           `name:"jobs" env:"POLLUX_BENCH_JOBS" default:"5000" help:"Jobs kept busy by the rate measurements."`
	Sizes       []int         `name:"sizes" env:"POLLUX_BENCH_SIZES" default:"1000000,3000000" help:"Tracked-job counts of the capacity section (the smallest also runs the workload mix, parking off and partitioned)."`
	Processes   []int         `name:"processes" env:"POLLUX_BENCH_PROCESSES" default:"1,2,4" help:"Poller process counts of the fleet section."`
	Partitions  int           `name:"partitions" env:"POLLUX_BENCH_PARTITIONS" default:"3" help:"Check partitions of the cluster's capacity run."`
	Only        []string      `name:"only" env:"POLLUX_BENCH_ONLY" help:"Run only these sections (micro, cycles, fleet, ingest, limits, webhook, faces, uploads, index, capacity, timers, cluster)."`
	JSON        bool          `name:"json" env:"POLLUX_BENCH_JSON" help:"Print the report as one JSON object."`
	CPUProfile  string        `name:"cpuprofile" env:"POLLUX_BENCH_CPUPROFILE" help:"Write a CPU profile of this process (its in-process pollers, ingest and webhook receiver) to this file, for go tool pprof."`
	ServerPprof int           `name:"server-pprof" env:"POLLUX_BENCH_SERVER_PPROF" help:"Serve the (single) nats-server's pprof on this loopback port (its --profile), to profile the server while a section runs: go tool pprof http://127.0.0.1:PORT/debug/pprof/profile."`
}

// Run measures and prints the report; progress goes to stderr.
func (c *BenchCmd) Run(g *Globals) error {
	ctx, stop := signalContext()
	defer stop()
	if c.CPUProfile != "" {
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench.Run(ctx, bench.Config{
		Bin: c.Bin, Window: c.Window, Jobs: c.Jobs, Sizes: c.Sizes, Processes: c.Processes,
		Partitions: c.Partitions, Only: c.Only, Progress: g.Stderr, ServerPprof: c.ServerPprof,
	})
	if rep != nil {
		printReport(g.Stdout, rep, c.JSON)
	}
	return err
}

func printReport(w io.Writer, rep *bench.Report, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return
	}
	rep.Print(w)
	fmt.Fprintln(w)
}
