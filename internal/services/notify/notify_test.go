package notify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/notify"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Two secrets, as during a rotation: the receiver knows only the new one.
const (
	oldSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	newSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
)

// receiver is an application's endpoint: it verifies each delivery's
// Standard Webhooks signature with the new secret, and answers what
// answer says for the delivery's id and attempt (nil: 200).
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	ver    *signature.Verifier
	answer func(id string, attempt int) (status int, delay time.Duration)

	mu       sync.Mutex
	attempts map[string]int      // by webhook-id
	got      map[string][]uint64 // delivered seqs by job, in order
	bad      int                 // deliveries whose signature failed
}

func newReceiver(t *testing.T, answer func(id string, attempt int) (int, time.Duration)) *receiver {
	t.Helper()
	v, err := signature.NewVerifier(newSecret)
	require.NoError(t, err)
	r := &receiver{t: t, ver: v, answer: answer, attempts: map[string]int{}, got: map[string][]uint64{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id, err := r.ver.Verify(req.Header, body)
	r.mu.Lock()
	if err != nil {
		r.bad++
		r.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.attempts[id]++
	n := r.attempts[id]
	r.mu.Unlock()
	status, delay := http.StatusOK, time.Duration(0)
	if r.answer != nil {
		status, delay = r.answer(id, n)
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return
		}
	}
	if status/100 == 2 {
		ev, err := events.DecodeEvent(body)
		if err == nil {
			r.mu.Lock()
			r.got[ev.JobID] = append(r.got[ev.JobID], ev.Seq)
			r.mu.Unlock()
		}
	}
	w.WriteHeader(status)
}

// delivered returns the seqs delivered per job.
func (r *receiver) delivered() map[string][]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]uint64{}
	for k, v := range r.got {
		out[k] = slices.Clone(v)
	}
	return out
}

// env is a NATS server with Pollux's streams, and the events publisher
// the jobs' owner would be.
type env struct {
	t   *testing.T
	js  jetstream.JetStream
	res *events.Resources
}

func newEnv(t *testing.T) *env {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Server(t))
	res, err := events.Default.Setup(t.Context(), js, events.Options{})
	require.NoError(t, err)
	return &env{t: t, js: js, res: res}
}

// publish publishes job events 1..n of job on route, the last terminal.
func (e *env) publish(route, job string, n int, notifyURL string) {
	e.t.Helper()
	for seq := 1; seq <= n; seq++ {
		st := state.Running
		typ := "running"
		if seq == n {
			st, typ = state.Succeeded, "succeeded"
		}
		ev := events.Event{V: events.Version, Type: typ, Seq: uint64(seq), Time: time.Now().UTC(), Route: route, JobID: job, State: st,
			Job: &state.Job{ID: job, Route: route, Model: "m", State: st, NotifyURL: notifyURL}}
		b, err := ev.Encode()
		require.NoError(e.t, err)
		_, err = e.js.Publish(e.t.Context(), events.Default.Event(route, job), b, jetstream.WithMsgID(events.MsgID(job, uint64(seq))))
		require.NoError(e.t, err)
	}
}

// run starts the service with the endpoints until the test ends (or stop
// is called); the events published before it are not delivered.
func (e *env) run(n config.Notify, routes map[string][]string, tune ...func(*notify.Config)) (stop func()) {
	e.t.Helper()
	cfg := notify.Config{Notify: n, Routes: routes, RetryBase: 100 * time.Millisecond, CircuitCooldown: 500 * time.Millisecond,
		Logger: zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.WarnLevel)}
	for _, f := range tune {
		f(&cfg)
	}
	svc, err := notify.New(cfg, e.js, events.Default)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	// Running once its copier exists: events from now on are delivered.
	require.Eventually(e.t, func() bool {
		_, err := e.res.Events.Consumer(ctx, events.Default.Prefix()+"-notify-copy")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(e.t, <-done)
		})
	}
	e.t.Cleanup(stop)
	return stop
}

func endpoint(url string, private bool) config.Endpoint {
	return config.Endpoint{URL: url, SecretsEnv: []string{"TEST_NOTIFY_OLD", "TEST_NOTIFY_NEW"}, AllowPrivate: private, Timeout: time.Second}
}

func secrets(t *testing.T) {
	t.Setenv("TEST_NOTIFY_OLD", oldSecret)
	t.Setenv("TEST_NOTIFY_NEW", newSecret)
}

// Every event reaches the endpoint, in order per job, signed with both
// secrets of a rotation (the receiver knowing only the new one), with one
// webhook-id across its retries — through failures, timeouts and slow
// answers.
func TestEveryEventIsDeliveredInOrder(t *testing.T) {
	secrets(t)
	e := newEnv(t)
	// Each delivery: first a 500, then a call that times out (the
	// endpoint's timeout is 1 s), then a slow 200.
	rc := newReceiver(t, func(_ string, attempt int) (int, time.Duration) {
		switch attempt {
		case 1:
			return http.StatusInternalServerError, 0
		case 2:
			return http.StatusOK, 3 * time.Second
		}
		return http.StatusOK, 300 * time.Millisecond
	})
	e.run(config.Notify{Endpoints: map[string]config.Endpoint{"app": endpoint(rc.srv.URL, true)}}, map[string][]string{"r": {"app"}},
		func(c *notify.Config) { c.CircuitFailures = 1000 }) // every delivery fails twice: no circuit here
	for i := range 4 {
		e.publish("r", fmt.Sprintf("job-%d", i), 3, "")
	}
	require.Eventually(t, func() bool {
		got := rc.delivered()
		for i := range 4 {
			if len(got[fmt.Sprintf("job-%d", i)]) < 3 {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond)
	for job, seqs := range rc.delivered() {
		require.Equal(t, []uint64{1, 2, 3}, seqs, "job %s: in order, each once", job)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Zero(t, rc.bad, "every signature verifies")
	require.Len(t, rc.attempts, 12, "one webhook-id per event, the same on every attempt")
	for id, n := range rc.attempts {
		require.GreaterOrEqual(t, n, 3, "%s: failed, timed out, then delivered", id)
	}
	ds, err := events.OutboxDeliveries(t.Context(), e.js, events.Default, "job-0")
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, events.OutboxDelivered, ds[0].State)
	require.EqualValues(t, 3, ds[0].Delivered)
	require.GreaterOrEqual(t, ds[0].Total, 9, "every attempt counted")
}

// An endpoint that never answers does not slow another: the live one gets
// every event promptly while the dead one's circuit opens.
func TestADeadEndpointDoesNotSlowALiveOne(t *testing.T) {
	secrets(t)
	e := newEnv(t)
	dead := newReceiver(t, func(string, int) (int, time.Duration) { return http.StatusOK, time.Minute })
	live := newReceiver(t, nil)
	var opened atomic.Bool
	e.run(config.Notify{Endpoints: map[string]config.Endpoint{
		"dead": endpoint(dead.srv.URL, true), "live": endpoint(live.srv.URL, true)}},
		map[string][]string{"r": {"dead", "live"}}, func(c *notify.Config) {
			c.Metrics.Circuit = func(endpoint string, open bool) {
				if endpoint == "dead" && open {
					opened.Store(true)
				}
			}
		})
	start := time.Now()
	for i := range 20 {
		e.publish("r", fmt.Sprintf("job-%d", i), 2, "")
	}
	require.Eventually(t, func() bool {
		n := 0
		for _, seqs := range live.delivered() {
			n += len(seqs)
		}
		return n == 40
	}, 20*time.Second, 20*time.Millisecond)
	t.Logf("the live endpoint had all 40 events after %s", time.Since(start).Round(time.Millisecond))
	require.Less(t, time.Since(start), 10*time.Second, "not held up by the dead endpoint's 1 s timeouts")
	require.Empty(t, dead.delivered())
	require.Eventually(t, func() bool {
		ds, err := events.OutboxDeliveries(t.Context(), e.js, events.Default, "job-0")
		return err == nil && len(ds) == 2 && ds[0].Endpoint == "dead" && ds[0].State == events.OutboxDelivering
	}, 10*time.Second, 20*time.Millisecond, "the dead endpoint's deliveries are being retried")
	require.Eventually(t, func() bool { return opened.Load() }, 10*time.Second, 20*time.Millisecond, "its circuit opens")
}

// A restart of Pollux while deliveries are being retried loses nothing:
// they are in JetStream, and the next process delivers them, in order.
func TestARestartMidRetryLosesNothing(t *testing.T) {
	secrets(t)
	e := newEnv(t)
	var mu sync.Mutex
	healthy := false
	rc := newReceiver(t, func(string, int) (int, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if healthy {
			return http.StatusOK, 0
		}
		return http.StatusServiceUnavailable, 0
	})
	n := config.Notify{Endpoints: map[string]config.Endpoint{"app": endpoint(rc.srv.URL, true)}}
	routes := map[string][]string{"r": {"app"}}
	stop := e.run(n, routes)
	for i := range 5 {
		e.publish("r", fmt.Sprintf("job-%d", i), 3, "")
	}
	require.Eventually(t, func() bool {
		for i := range 5 {
			ds, err := events.OutboxDeliveries(t.Context(), e.js, events.Default, fmt.Sprintf("job-%d", i))
			if err != nil || len(ds) != 1 || ds[0].State != events.OutboxDelivering {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "every job's first event failed and is being retried")
	stop()
	mu.Lock()
	healthy = true
	mu.Unlock()
	e.run(n, routes)
	require.Eventually(t, func() bool {
		got := rc.delivered()
		for i := range 5 {
			if len(got[fmt.Sprintf("job-%d", i)]) < 3 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond)
	for job, seqs := range rc.delivered() {
		require.Equal(t, []uint64{1, 2, 3}, seqs, "job %s", job)
	}
}

// By default, Pollux does not call loopback, private or link-local
// addresses, however the URL names them: such a delivery is given up at
// once, and says why. A submission's own endpoint is delivered with the
// submissions' settings, and an endpoint can take jobs' ends only.
func TestPrivateTargetsAreRefused(t *testing.T) {
	secrets(t)
	e := newEnv(t)
	rc := newReceiver(t, nil)
	own := newReceiver(t, nil)
	// The receiver listens on 127.0.0.1; "localhost" names it too.
	byName := strings.Replace(rc.srv.URL, "127.0.0.1", "localhost", 1)
	sub := endpoint("", true)
	sub.Events = config.NotifyTerminal
	e.run(config.Notify{Endpoints: map[string]config.Endpoint{
		"ip": endpoint(rc.srv.URL, false), "name": endpoint(byName, false)}, Submissions: &sub},
		map[string][]string{"r": {"ip", "name"}})
	e.publish("r", "job", 2, own.srv.URL+"/hook?order=42")
	require.Eventually(t, func() bool {
		ds, err := events.OutboxDeliveries(t.Context(), e.js, events.Default, "job")
		if err != nil || len(ds) != 3 {
			return false
		}
		for _, d := range ds {
			want := events.OutboxGivenUp
			if d.Endpoint == config.NotifySubmissions {
				want = events.OutboxDelivered
			}
			if d.State != want {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond)
	ds, err := events.OutboxDeliveries(t.Context(), e.js, events.Default, "job")
	require.NoError(t, err)
	for _, d := range ds {
		if d.Endpoint != config.NotifySubmissions {
			require.Contains(t, d.Last, "a loopback address", d.Endpoint)
			require.Equal(t, 1, d.Attempts, "given up at once")
		} else {
			require.Equal(t, own.srv.URL+"/hook?order=42", d.URL)
		}
	}
	require.Empty(t, rc.delivered(), "never called")
	require.Equal(t, map[string][]uint64{"job": {2}}, own.delivered(), "the submission's own endpoint, its end only")
}

// An endpoint answering 410 Gone asks to stop: the delivery is given up,
// and the job's later events still go (they may be wanted again).
func TestGoneGivesADeliveryUp(t *testing.T) {
	secrets(t)
	e := newEnv(t)
	rc := newReceiver(t, func(id string, _ int) (int, time.Duration) {
		if strings.HasSuffix(id, "_1") {
			return http.StatusGone, 0
		}
		return http.StatusOK, 0
	})
	e.run(config.Notify{Endpoints: map[string]config.Endpoint{"app": endpoint(rc.srv.URL, true)}}, map[string][]string{"r": {"app"}})
	e.publish("r", "job", 2, "")
	require.Eventually(t, func() bool { return len(rc.delivered()["job"]) == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, []uint64{2}, rc.delivered()["job"])
}

// A job's later events wait while an earlier one is being retried: the
// endpoint sees them in order, whichever process and worker holds them.
func TestALaterEventWaitsForAnEarlierOne(t *testing.T) {
	secrets(t)
	e := newEnv(t)
	rc := newReceiver(t, func(id string, attempt int) (int, time.Duration) {
		if strings.HasSuffix(id, "_1") && attempt <= 3 {
			return http.StatusServiceUnavailable, 0
		}
		return http.StatusOK, 0
	})
	e.run(config.Notify{Endpoints: map[string]config.Endpoint{"app": endpoint(rc.srv.URL, true)}}, map[string][]string{"r": {"app"}})
	e.publish("r", "job", 3, "")
	require.Eventually(t, func() bool { return len(rc.delivered()["job"]) == 3 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, []uint64{1, 2, 3}, rc.delivered()["job"])
}
