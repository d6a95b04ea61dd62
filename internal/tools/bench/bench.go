package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/tools/dev"
)

// Sections of the bench, in the order they run.
var Sections = []string{"micro", "cycles", "fleet", "ingest", "limits", "webhook", "faces", "uploads", "index", "capacity", "timers", "cluster"}

// Config configures a run. Zero values mean the defaults on each field.
type Config struct {
	// Bin is the directory holding the nats-server and poller binaries
	// (make bench builds them into bin/).
	Bin string
	// Window is how long each rate is measured (default 10s).
	Window time.Duration
	// Jobs is how many jobs the rate measurements keep busy (default
	// 5000): enough that the demand exceeds what is measured.
	Jobs int
	// Sizes are the tracked-job counts of the capacity section (default
	// 1M and 3M).
	Sizes []int
	// ServerPprof, when set, is the loopback port a single nats-server
	// serves its pprof on (its --profile), to profile the server.
	ServerPprof int
	// Processes are the poller process counts of the fleet section
	// (default 1, 2 and 4).
	Processes []int
	// Partitions is the check partitions of the cluster's capacity run,
	// spread over its nodes (default 3).
	Partitions int
	// Only runs these sections (default: all of Sections).
	Only []string
	// Progress receives a line per step (default: none).
	Progress io.Writer
}

func (c Config) withDefaults() Config {
	c.Window = cmp.Or(c.Window, 10*time.Second)
	c.Jobs = cmp.Or(c.Jobs, 5000)
	if len(c.Sizes) == 0 {
		c.Sizes = []int{1_000_000, 3_000_000}
	}
	if len(c.Processes) == 0 {
		c.Processes = []int{1, 2, 4}
	}
	c.Partitions = cmp.Or(c.Partitions, 3)
	if len(c.Only) == 0 {
		c.Only = Sections
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// runner holds one run's state.
type runner struct {
	cfg    Config
	dir    string
	report *Report
}

// Run measures the selected sections and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	for _, s := range cfg.Only {
		if !slices.Contains(Sections, s) {
			return nil, fmt.Errorf("bench: unknown section %q (sections: %v)", s, Sections)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.Bin, "nats-server")); err != nil {
		return nil, fmt.Errorf("bench: %w (build it with `make bench`, or pass --bin)", err)
	}
	dir, err := os.MkdirTemp("", "pollux-bench-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	r := &runner{cfg: cfg, dir: dir, report: &Report{
		Started: time.Now(),
		Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
	}}
	steps := map[string]func(context.Context) error{
		"micro": r.micro, "cycles": r.cycles, "fleet": r.fleet, "ingest": r.ingest, "limits": r.limits, "webhook": r.webhook, "faces": r.faces, "uploads": r.uploads,
		"index": r.index, "capacity": r.capacity, "timers": r.timers, "cluster": r.cluster,
	}
	for _, s := range Sections {
		if !slices.Contains(cfg.Only, s) {
			continue
		}
		r.progress("== %s", s)
		if err := steps[s](ctx); err != nil {
			return r.report, fmt.Errorf("bench %s: %w", s, err)
		}
	}
	r.report.Duration = time.Since(r.report.Started).Round(time.Second).String()
	return r.report, nil
}

func (r *runner) progress(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// withServer runs fn against a fresh nats-server (a three-node cluster
// when cluster is true), stopped afterwards.
// withStack runs fn on a whole Pollux in process (dev.Start: the services,
// the front door, the simulated provider) over a fresh single server;
// everything stops when fn returns.
func (r *runner) withStack(ctx context.Context, sc dev.StackConfig, fn func(st *dev.Stack, js jetstream.JetStream) error) error {
	return r.withServer(ctx, false, func(_ *server, nc *nats.Conn, js jetstream.JetStream) error {
		sctx, cancel := context.WithCancel(ctx)
		g, gctx := errgroup.WithContext(sctx)
		defer func() {
			cancel()
			_ = g.Wait()
		}()
		st, err := dev.Start(gctx, g, nc, sc)
		if err != nil {
			return err
		}
		return fn(st, js)
	})
}

func (r *runner) withServer(ctx context.Context, cluster bool, fn func(s *server, nc *nats.Conn, js jetstream.JetStream) error) error {
	dir, err := os.MkdirTemp(r.dir, "nats-")
	if err != nil {
		return err
	}
	s, err := startServer(ctx, filepath.Join(r.cfg.Bin, "nats-server"), dir, cluster, r.cfg.ServerPprof)
	if err != nil {
		return err
	}
	defer s.stop()
	nc, err := nats.Connect(s.url, nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*seedWindow))
	if err != nil {
		return err
	}
	return fn(s, nc, js)
}
