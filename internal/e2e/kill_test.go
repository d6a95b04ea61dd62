package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/budget"
	"github.com/pollux-dev/pollux/internal/faultpoint"
	"github.com/pollux-dev/pollux/internal/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// supervisor keeps a process running: restarted whenever it exits, until
// halted. kill SIGKILLs the current one (it is then restarted).
type supervisor struct {
	t      *testing.T
	name   string
	launch func() *proc
	mu     sync.Mutex
	cur    *proc
	stop   chan struct{}
	halt   func()
	done   chan struct{}
	starts int
}

// supervise launches a process and keeps it running until the test ends.
// Every launch registers the process's cleanup (SIGTERM and wait), and
// then the supervisor's halt: cleanups run last-registered first, so the
// supervisor stops before any of its processes is stopped, and a process
// stopped by its cleanup is not restarted.
func supervise(t *testing.T, name string, launch func() *proc) *supervisor {
	s := &supervisor{t: t, name: name, stop: make(chan struct{}), done: make(chan struct{})}
	s.halt = sync.OnceFunc(func() { close(s.stop); <-s.done })
	s.launch = func() *proc {
		p := launch()
		t.Cleanup(s.halt)
		return p
	}
	s.cur, s.starts = s.launch(), 1
	go func() {
		defer close(s.done)
		for {
			s.mu.Lock()
			cur := s.cur
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-cur.done:
			}
			select {
			case <-s.stop:
				return
			case <-time.After(time.Duration(100+rand.IntN(400)) * time.Millisecond):
			}
			s.mu.Lock()
			s.cur = s.launch()
			s.starts++
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *supervisor) kill() {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	_ = cur.cmd.Process.Kill()
}

// killAtRandom SIGKILLs one of sups at random every every+[0, spread)
// until the returned stop is called, which returns the number of kills.
func killAtRandom(sups []*supervisor, rnd *rand.Rand, every, spread time.Duration) (stop func() int) {
	done := make(chan struct{})
	killed := make(chan int)
	go func() {
		k := 0
		defer func() { killed <- k }()
		for {
			select {
			case <-done:
				return
			case <-time.After(every + time.Duration(rnd.Int64N(int64(spread)))):
			}
			sups[rnd.IntN(len(sups))].kill()
			k++
		}
	}()
	return func() int { close(done); return <-killed }
}

// killRun is one run of the kill scenario.
func killRun(t *testing.T, idempotent bool) {
	bin := binaries(t)
	dir := t.TempDir()
	natsURL, js := natsProcess(t, bin, dir)

	tokenEnv := []string{"SIM_TOKEN=kill-token"}
	_, simAddr := simProcess(t, bin, dir, "sim", fmt.Sprintf(`
time_scale: 50
seed: 31
latency: 5ms
default: {queue_median: 3s, queue_sigma: 0.5, run_median: 40s, run_sigma: 0.4, fail_rate: 0.1}
faults: {server_error_rate: 0.02, webhook_missing_rate: 0.2, not_idempotent: %v}
`, !idempotent), tokenEnv, "SIM_TOKEN")

	hookAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := filepath.Join(dir, "pollux.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
streams: {intake_ack_wait: 6s, check_ack_wait: 4s}
routes:
  sim:
    kind: replicate
    base_url: http://%s
    token_env: SIM_TOKEN
    webhook_url: http://%s/webhooks/sim
    workers: {submit: 4, status: 8}
    budgets:
      submit: {concurrency: 2, lease_wait: 5s}
      status: {concurrency: 4, lease_wait: 5s}
    options: {idempotent: %v}
`, simAddr, hookAddr, idempotent)), 0o600))
	svcEnv := append(tokenEnv, "POLLUX_NATS_URL="+natsURL, "POLLUX_CONFIG="+cfg, "POLLUX_METRICS_ADDR=",
		"POLLUX_TIME_SCALE=50", "POLLUX_WEBHOOK_ADDR="+hookAddr)

	// Ingest also crashes right after the provider accepted a job, before
	// the record knows its remote id: the window only idempotency (or
	// reconciliation) makes safe.
	ingestEnv := append(svcEnv, faultpoint.Env+"=after-submit:0.03")
	var n atomic.Int64
	var sups []*supervisor
	for _, s := range []struct {
		name string
		env  []string
	}{{"ingest", ingestEnv}, {"poller-a", svcEnv}, {"poller-b", svcEnv}, {"webhook", svcEnv}} {
		bin := filepath.Join(bin, s.name)
		if s.name[:6] == "poller" {
			bin = filepath.Join(filepath.Dir(bin), "poller")
		}
		name, e := s.name, s.env
		sups = append(sups, supervise(t, name, func() *proc { return launch(t, fmt.Sprintf("%s-%d", name, n.Add(1)), e, bin) }))
	}
	log := followFleet(t, js)

	jobs := size(100, 2000)
	ids := make([]string, jobs)
	rnd := rand.New(rand.NewPCG(5, 5))
	for i := range jobs {
		key := fmt.Sprintf("kill-%05d", i)
		ids[i] = events.KeyID("sim", key)
		msg, _ := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: "kill/model", Input: json.RawMessage(`{}`)})
		for range 1 + rnd.IntN(2) {
			_, err := js.Publish(context.Background(), events.Default.Submit("sim"), msg)
			require.NoError(t, err)
		}
	}

	// Kill a random process every 1-2.5 s until every job is done.
	stopKilling := killAtRandom(sups, rnd, time.Second, 1500*time.Millisecond)
	waitTerminal(t, js, log, ids, time.Duration(size(150, 900))*time.Second)
	kills := stopKilling()

	st := simStats(t, "http://"+simAddr)
	var truth []sim.Prediction
	require.NoError(t, json.Unmarshal([]byte(get(t, "http://"+simAddr+"/_sim/predictions")), &truth))
	e := &env{js: js, ns: events.Default, log: log}
	o := verifyProcesses(t, e, ids, truth, st)
	o.faults = kills + st.ServerErrors + st.WebhooksMissing
	restarts := 0
	for _, s := range sups {
		s.mu.Lock()
		restarts += s.starts - 1
		s.mu.Unlock()
	}
	if idempotent {
		t.Logf("%d creates repeated a key after an interrupted submit (the provider deduplicated them)", st.DuplicateCreates)
	} else {
		require.Zero(t, st.DuplicateCreates, "one create per idempotency key: no in-doubt submission was retried")
	}
	// No lease left behind: once a dead holder's lease wait has passed,
	// every lease of both budgets can be taken.
	res, err := events.Default.Open(context.Background(), js)
	require.NoError(t, err)
	for _, kind := range []string{events.SlotSubmit, events.SlotStatus} {
		limit := map[string]int{events.SlotSubmit: 2, events.SlotStatus: 4}[kind]
		b, err := budget.Ensure(context.Background(), js, events.Default, res.Slots, "sim", kind,
			budget.Limit{Concurrency: limit, LeaseWait: 5 * time.Second}, events.Options{})
		require.NoError(t, err)
		b.Wait = 10 * time.Second
		var held []*budget.Lease
		for range limit {
			l, err := b.Acquire(context.Background())
			require.NoError(t, err, "%s lease %d came back", kind, len(held))
			held = append(held, l)
		}
		for _, l := range held {
			l.Release()
		}
	}
	label := "SIGKILL fleet (idempotent)"
	if !idempotent {
		label = "SIGKILL fleet (no idempotency)"
	}
	t.Logf("%d kills, %d restarts (crash points included)", kills, restarts)
	reportFaults(t, label, o)
}

// verifyProcesses is verify for a fleet of processes: the job records are
// read from the bucket of the server the processes share.
func verifyProcesses(t *testing.T, e *env, ids []string, truth []sim.Prediction, st sim.Stats) outcome {
	t.Helper()
	res, err := events.Default.Open(context.Background(), e.js)
	require.NoError(t, err)
	owner := jobs.New(events.Default, e.js, res, jobs.Config{})
	byKey := map[string][]sim.Prediction{}
	for _, p := range truth {
		byKey[p.IdempotencyKey] = append(byKey[p.IdempotencyKey], p)
	}
	o := outcome{jobs: len(ids), states: map[state.State]int{}}
	terminal := e.log.terminal()
	all := e.log.jobs()
	for _, id := range ids {
		if len(terminal[id]) != 1 {
			t.Errorf("job %s: %d terminal events", id, len(terminal[id]))
			o.lost++
			continue
		}
		got := terminal[id][0].State
		o.states[got]++
		j, err := owner.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, got, j.State)
		for i, ev := range all[id] {
			require.Equal(t, uint64(i+1), ev.Seq, "job %s: events in order", id)
		}
		ps := byKey[j.IdempotencyKey]
		require.LessOrEqual(t, len(ps), 1, "job %s: one remote job per idempotency key", id)
		if len(ps) == 1 && (got == state.Succeeded || got == state.Failed) {
			require.Equal(t, string(got), ps[0].Status, "job %s", id)
			require.Equal(t, ps[0].ID, j.RemoteID)
			o.worstDelay = max(o.worstDelay, j.DetectedAt.Sub(j.CompletedAt))
		}
		if got == state.Lost {
			require.True(t, j.SubmitInDoubt, "job %s lost although its submission was not in doubt", id)
		}
	}
	waitFor(t, "no check message left", 60*time.Second, func() bool {
		info, err := res.Checks.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	require.Zero(t, o.lost, "jobs lost")
	return o
}

// TestChaosKillProcesses SIGKILLs ingest, pollers and the webhook receiver
// at random moments, and crashes ingest between the provider's create
// answer and the KV write, while jobs run; supervisors restart them. With
// an idempotent provider every job finishes; without, a job whose
// submission was interrupted is reported lost rather than submitted twice.
func TestChaosKillProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	t.Run("idempotent provider", func(t *testing.T) { killRun(t, true) })
	t.Run("provider without idempotency", func(t *testing.T) { killRun(t, false) })
}
