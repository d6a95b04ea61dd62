package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// simToken is the simulated provider's API token in the bench.
const simToken = "bench-token"

// fleet measures status calls per second through 1, 2 and 4 poller
// processes against the simulated provider over HTTP, answering at once,
// with no budget and with a status budget that never binds.
func (r *runner) fleet(ctx context.Context) error {
	bin := filepath.Join(r.cfg.Bin, "poller")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (build it with `make bench`)", err)
	}
	return r.withServer(ctx, false, func(s *server, nc *nats.Conn, _ jetstream.JetStream) error {
		sm, err := startSim(ctx)
		if err != nil {
			return err
		}
		defer sm.stop()
		rg, err := openRig(ctx, nc, config.Streams{}, config.Route{Kind: replicate.Kind}, sm.adapter)
		if err != nil {
			return err
		}
		defer func() { _ = rg.close() }()
		r.progress("creating %d predictions at the simulated provider", r.cfg.Jobs)
		remote, err := sm.create(ctx, r.cfg.Jobs)
		if err != nil {
			return err
		}
		if err := rg.seed(ctx, r.cfg.Jobs, cycleDelay, func(i int) string { return remote[i] }, nil); err != nil {
			return err
		}
		off, err := r.pollerConfig(rg.env.NS.Prefix(), sm.url, 0)
		if err != nil {
			return err
		}
		var one float64
		for _, k := range r.cfg.Processes {
			r.progress("%d poller process(es), no budget", k)
			fr, err := r.pollerProcesses(ctx, s, sm, off, k)
			if err != nil {
				return err
			}
			r.progress("  %.0f status calls/s, poller CPU %.0f µs per call, machine %.0f%% busy", fr.perSecond, fr.cpuPer, 100*fr.busy)
			row := r.report.add(Row{Group: "fleet", Name: fmt.Sprintf("status calls/s, %d poller process(es)", k), Value: fr.perSecond, Unit: "/s",
				Note: fmt.Sprintf("poller CPU %.0f µs per call, machine %.0f%% busy", fr.cpuPer, 100*fr.busy)})
			switch {
			case k == 1:
				one = fr.perSecond
			case k == 2 && one > 0:
				row.Target = "≥ 1.5× one process"
				met := fr.perSecond >= 1.5*one
				row.Met = &met
				row.Note += fmt.Sprintf("; %.2f× one process", fr.perSecond/one)
			}
		}
		return r.budgetCost(ctx, s, sm, rg.env.NS.Prefix(), off)
	})
}

// budgetRounds is how many times the budget's cost is measured.
const budgetRounds = 3

// budgetCost measures what a status budget that never binds adds to the
// cost of a poll: the CPU of the poller process and the nats-server per
// status call (the simulated provider's is the same either way), one
// process with the budget off and on, alternating, the median of the
// rounds' ratios reported, so that drift over the run cancels out.
func (r *runner) budgetCost(ctx context.Context, s *server, sm *simProvider, prefix, off string) error {
	on, err := r.pollerConfig(prefix, sm.url, 1000)
	if err != nil {
		return err
	}
	var costs, rates []float64
	for round := range budgetRounds {
		var pair [2]fleetRate
		for i, cfg := range []string{off, on} {
			r.progress("budget cost, round %d of %d: status budget %s", round+1, budgetRounds, map[bool]string{false: "off", true: "on"}[i == 1])
			if pair[i], err = r.pollerProcesses(ctx, s, sm, cfg, 1); err != nil {
				return err
			}
		}
		if pair[0].cost() > 0 {
			costs = append(costs, pair[1].cost()/pair[0].cost()-1)
		}
		rates = append(rates, pair[1].perSecond)
		r.progress("  %.0f → %.0f µs per call (poller + server)", pair[0].cost(), pair[1].cost())
	}
	if len(costs) == 0 {
		return errors.New("budget cost: no status calls measured")
	}
	r.report.add(Row{Group: "fleet", Name: "status calls/s, 1 poller process, status budget on", Value: median(rates), Unit: "/s",
		Note: fmt.Sprintf("median of %d rounds", budgetRounds)})
	r.report.add(Row{Group: "fleet", Name: "cost the status budget adds to a poll (poller + server CPU per call), 1 process", Value: 100 * median(costs), Unit: "%",
		Note: fmt.Sprintf("median of %d alternating rounds: %s", len(costs), percents(costs))}).
		atMost(20, "< 20%")
	return nil
}

// median is the middle value of xs (not empty), the mean of the middle two
// when their number is even.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	return (s[(n-1)/2] + s[n/2]) / 2
}

// percents formats ratios as percentages.
func percents(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%+.0f%%", 100*x)
	}
	return strings.Join(out, " ")
}

// pollerConfig writes the poller processes' configuration.
func (r *runner) pollerConfig(prefix, simURL string, budget int) (string, error) {
	b := ""
	if budget > 0 {
		b = fmt.Sprintf("\n    budgets: {status: {concurrency: %d}}", budget)
	}
	path := filepath.Join(r.dir, fmt.Sprintf("poller-%s-%d.yaml", prefix, budget))
	return path, os.WriteFile(path, fmt.Appendf(nil, `prefix: %s
routes:
  %s:
    kind: replicate
    base_url: %s
    token_env: SIM_TOKEN
    workers: {status: %d}
    poll: {min_delay: %s, max_delay: %s}%s
    options: {idempotent: true}
`, prefix, benchRoute, simURL, statusWorkers, cycleDelay, cycleDelay, b), 0o600)
}

// pollerProcesses runs k poller processes and returns the status calls per
// second the provider saw from them.
func (r *runner) pollerProcesses(ctx context.Context, s *server, sm *simProvider, cfgPath string, k int) (fleetRate, error) {
	env := []string{"SIM_TOKEN=" + simToken, "POLLUX_NATS_URL=" + s.url, "POLLUX_CONFIG=" + cfgPath,
		"POLLUX_METRICS_ADDR=", "POLLUX_LOG_LEVEL=warn"}
	var procs []*process
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for i := range k {
		p, err := start(fmt.Sprintf("poller-%d-of-%d", i+1, k), r.dir, env, filepath.Join(r.cfg.Bin, "poller"))
		if err != nil {
			return fleetRate{}, err
		}
		procs = append(procs, p)
	}
	if err := sleep(ctx, 3*time.Second); err != nil {
		return fleetRate{}, err
	}
	procCPU := func() (time.Duration, error) {
		var total time.Duration
		for _, p := range procs {
			if p.exited() {
				return 0, fmt.Errorf("%s exited: %w (its log: %s)", p.name, p.err, p.logs.Name())
			}
			u, err := p.usage()
			if err != nil {
				return 0, err
			}
			total += u.CPU
		}
		return total, nil
	}
	c0, err := procCPU()
	if err != nil {
		return fleetRate{}, err
	}
	s0, err := s.usage()
	if err != nil {
		return fleetRate{}, err
	}
	m0, err := machineCPU()
	if err != nil {
		return fleetRate{}, err
	}
	calls0, t0 := sm.srv.Stats().StatusCalls, time.Now()
	if err := sleep(ctx, r.cfg.Window); err != nil {
		return fleetRate{}, err
	}
	calls, elapsed := sm.srv.Stats().StatusCalls-calls0, time.Since(t0)
	c1, err := procCPU()
	if err != nil {
		return fleetRate{}, err
	}
	s1, err := s.usage()
	if err != nil {
		return fleetRate{}, err
	}
	m1, err := machineCPU()
	if err != nil {
		return fleetRate{}, err
	}
	out := fleetRate{perSecond: float64(calls) / elapsed.Seconds(), busy: m1.busySince(m0)}
	if calls > 0 {
		out.cpuPer = float64((c1 - c0).Microseconds()) / float64(calls)
		out.serverPer = float64((s1.CPU - s0.CPU).Microseconds()) / float64(calls)
	}
	return out, nil
}

// fleetRate is what a fleet measurement saw.
type fleetRate struct {
	perSecond float64
	// cpuPer is the poller processes' CPU per status call (µs).
	cpuPer float64
	// serverPer is the nats-server's CPU per status call (µs).
	serverPer float64
	// busy is the share of the machine's CPU in use (all processes).
	busy float64
}

// cost is the CPU the fleet's own processes (pollers and nats-server) spend
// per status call (µs).
func (f fleetRate) cost() float64 { return f.cpuPer + f.serverPer }

// simProvider is the simulated provider on a loopback port, every
// prediction running forever and every call answered at once.
type simProvider struct {
	srv     *sim.Server
	url     string
	adapter provider.Adapter
	cancel  context.CancelFunc
	g       *errgroup.Group
}

func startSim(ctx context.Context) (*simProvider, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String()
	srv, err := sim.New(sim.Config{Token: simToken, BaseURL: url, TimeScale: 1, Seed: 1,
		Default: sim.Model{QueueMedian: sim.Duration(time.Millisecond), RunMedian: sim.Duration(time.Hour), NeverFinish: 1}})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	a, err := replicate.New(provider.Config{Route: benchRoute, Kind: replicate.Kind, BaseURL: url, Token: simToken,
		Options: json.RawMessage(`{"idempotent":true}`)})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(sctx)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	g.Go(func() error {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error { <-gctx.Done(); return hs.Close() })
	g.Go(func() error { return srv.Run(gctx) })
	return &simProvider{srv: srv, url: url, adapter: a, cancel: cancel, g: g}, nil
}

// create makes n predictions and returns their ids.
func (s *simProvider) create(ctx context.Context, n int) ([]string, error) {
	ids := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			st, err := s.adapter.Submit(gctx, provider.SubmitRequest{
				JobID: fmt.Sprintf("bench-%07d", i), Model: "bench/model", Input: json.RawMessage(`{}`),
				IdempotencyKey: fmt.Sprintf("bench-%07d", i),
			})
			if err != nil {
				return err
			}
			if st.State.Terminal() && st.State != state.Succeeded {
				return fmt.Errorf("prediction %d: %s", i, st.State)
			}
			ids[i] = st.RemoteID // each goroutine writes its own element
			return nil
		})
	}
	return ids, g.Wait()
}

func (s *simProvider) stop() {
	s.cancel()
	_ = s.g.Wait()
}
