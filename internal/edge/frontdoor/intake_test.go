package frontdoor_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// outage is a front door on a NATS server the test stops and starts
// again, publishing its intake on a connection of its own without a
// reconnect buffer (through proxy, when the test wants to lose acks).
type outage struct {
	*door
	stack  *stack.Stack
	proxy  *natstest.Proxy
	intake *nats.Conn
	// settled are the settlements Metrics.Unconfirmed saw, "route/outcome".
	mu      sync.Mutex
	settled []string
}

// setupOutage runs a front door with cfg on a restartable server; with
// proxy, its intake connection goes through a natstest.Proxy. cfg.Intake
// set to a non-nil value asks for that connection (the test's own
// frontdoor.Config cannot make it).
func setupOutage(t *testing.T, cfg frontdoor.Config, proxy bool, with func(d *door, cfg *frontdoor.Config)) *outage {
	t.Helper()
	s := stack.New(t, stack.Config{Restartable: true})
	o := &outage{stack: s}
	url := s.NATS.URL()
	if proxy {
		o.proxy = natstest.NewProxy(t, strings.TrimPrefix(url, "nats://"))
		url = o.proxy.URL()
	}
	nc, err := nats.Connect(url, nats.ReconnectBufSize(-1), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	o.intake = nc
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	cfg.Intake = js
	cfg.Metrics.Unconfirmed = func(route, outcome string) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.settled = append(o.settled, route+"/"+outcome)
	}
	o.door = setupOn(t, s, cfg, with)
	return o
}

// down stops the server and waits until the front door's connections
// know it.
func (o *outage) down(t *testing.T) {
	t.Helper()
	o.stack.NATS.Stop()
	require.Eventually(t, func() bool { return !o.stack.NC.IsConnected() && !o.intake.IsConnected() }, 10*time.Second, 10*time.Millisecond)
}

// up starts the server again and waits until the front door's
// connections are back.
func (o *outage) up(t *testing.T) {
	t.Helper()
	o.stack.NATS.Start(t)
	require.Eventually(t, func() bool { return o.stack.NC.IsConnected() && o.intake.IsConnected() }, 20*time.Second, 10*time.Millisecond)
}

// stored is how many messages the intake stream holds on route's
// submission subject.
func (o *outage) stored(t *testing.T) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := o.res.Intake.Info(ctx, jetstream.WithSubjectFilter(o.ns.Submit(route)))
	require.NoError(t, err)
	return info.State.Msgs
}

func (o *outage) outcomes() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.settled...)
}

func submitBody(id string) string {
	return fmt.Sprintf(`{"v":1,"route":%q,"id":%q,"model":"m","input":{}}`, route, id)
}

// A create made while NATS is down sends nothing: it waits ConnectWait
// for the connection, then is answered 503 — and nothing of it is
// stored, not even once NATS is back (a reconnect buffer would send it
// then). Whether the front door's intake connection has a reconnect
// buffer (Config.Intake nil: the shared one) or not.
func TestACreateWhileNATSIsDownSendsNothing(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			t.Parallel()
			o := setupOutage(t, frontdoor.Config{ConnectWait: 300 * time.Millisecond}, false, func(_ *door, cfg *frontdoor.Config) {
				if shared {
					cfg.Intake = nil
				}
			})
			o.down(t)
			r := o.do(t, http.MethodPost, "/v1/jobs", submitBody("while-down"), nil)
			requireError(t, r, http.StatusServiceUnavailable, frontdoor.CodeUnavailable, "")
			require.Contains(t, r.body["error"].(map[string]any)["message"], "not stored")
			require.NotEmpty(t, r.header.Get("Retry-After"))
			o.up(t)
			// A create after it, on the same connection, is stored after
			// anything the connection sent before it.
			r = o.do(t, http.MethodPost, "/v1/jobs", submitBody("after"), nil)
			require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
			require.Equal(t, uint64(1), o.stored(t), "the create answered 503 stored nothing")
			require.Contains(t, string(o.lastIntake(t, o.ns.Submit(route))), `"id":"after"`)
		})
	}
}

// A create made while NATS is down is sent once the connection is back
// within ConnectWait: a restart of a few seconds does not reach the app.
func TestACreateWaitsForNATSToComeBack(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, frontdoor.Config{ConnectWait: time.Minute, DoubtWait: 10 * time.Second}, false, nil)
	o.down(t)
	answered := make(chan reply, 1)
	go func() { answered <- o.do(t, http.MethodPost, "/v1/jobs", submitBody("waited"), nil) }()
	select {
	case r := <-answered:
		t.Fatalf("answered while NATS was down: %d %s", r.status, r.raw)
	case <-time.After(200 * time.Millisecond):
	}
	o.up(t)
	r := <-answered
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, uint64(1), o.stored(t))
}

// A submission whose ack is lost — stored, the answer held on the way —
// is in doubt: the front door sends it again, with the same Nats-Msg-Id,
// until an ack says it is stored; the stream holds it once, and the
// create is answered 202.
func TestASubmissionInDoubtIsSentAgainAndStoredOnce(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, frontdoor.Config{RequestTimeout: 300 * time.Millisecond, DoubtWait: 50 * time.Second}, true, nil)
	o.proxy.Hold()
	answered := make(chan reply, 1)
	go func() { answered <- o.do(t, http.MethodPost, "/v1/jobs", submitBody("doubted"), nil) }()
	require.Eventually(t, func() bool { return o.stored(t) == 1 }, 10*time.Second, 10*time.Millisecond, "the first copy is stored")
	sent := o.proxy.Sent()
	require.Eventually(t, func() bool { return o.proxy.Sent() > sent }, 10*time.Second, 10*time.Millisecond, "a second copy is sent")
	o.proxy.Release()
	r := <-answered
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, uint64(1), o.stored(t), "stored once: its copies carry its Nats-Msg-Id")
	m, err := o.res.Intake.GetLastMsgForSubject(context.Background(), o.ns.Submit(route))
	require.NoError(t, err)
	require.Equal(t, events.IntakeMsgID(events.KindSubmit, route, "doubted"), m.Header.Get(jetstream.MsgIDHeader))
	require.Empty(t, o.outcomes(), "nothing to settle")
}

// A submission still in doubt when DoubtWait passes is answered 503, and
// settled once NATS answers: its job's record is created ended before
// ingest takes the stored copy (which then makes nothing), or, when
// ingest took it first, its cancel is requested — a job that never
// reached the provider ends at once.
func TestACreateAnswered503InDoubtIsSettled(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, frontdoor.Config{RequestTimeout: 200 * time.Millisecond, DoubtWait: 600 * time.Millisecond}, true, nil)
	// Ingest took "taken" first: its record exists, not yet submitted.
	o.storeJob(t, &state.Job{ID: "taken", Route: route, Model: "m", State: state.Pending, IntakeSeq: 7, CreatedAt: time.Now().UTC()})
	o.proxy.Hold()
	for _, id := range []string{"unconfirmed", "taken"} {
		r := o.do(t, http.MethodPost, "/v1/jobs", submitBody(id), nil)
		requireError(t, r, http.StatusServiceUnavailable, frontdoor.CodeUnavailable, "")
		require.Contains(t, r.body["error"].(map[string]any)["message"], "did not confirm", id)
	}
	require.Equal(t, uint64(2), o.stored(t), "the copies were stored all the same")
	o.proxy.Release()
	for id, outcome := range map[string]string{"unconfirmed": frontdoor.SettledWithdrawn, "taken": frontdoor.SettledCanceled} {
		j := o.stack.Until(id, func(j *state.Job) bool { return j.State.Terminal() })
		require.Equal(t, state.Canceled, j.State, id)
		require.Equal(t, frontdoor.UnconfirmedReason, j.CancelReason, id)
		require.Eventually(t, func() bool { return slices.Contains(o.outcomes(), route+"/"+outcome) }, 10*time.Second, 10*time.Millisecond,
			"%s: %v", id, o.outcomes())
	}
	require.Equal(t, frontdoor.UnconfirmedReason, o.stack.Job("unconfirmed").Reason)
	require.Zero(t, o.stack.Job("unconfirmed").IntakeSeq, "no intake message made it: ingest finds it and makes nothing")
}

// The front door publishes its intake on a connection without a
// reconnect buffer, and holds a submission in doubt well inside the
// intake stream's duplicate window.
func TestIntakeSettingsAreChecked(t *testing.T) {
	t.Parallel()
	s := stack.New(t, stack.Config{})
	_, err := frontdoor.New(frontdoor.Config{Routes: []string{route}, Intake: s.JS}, s.JS, s.NS, s.Res, s.Jobs)
	require.ErrorContains(t, err, "reconnect buffer")
	_, err = frontdoor.New(frontdoor.Config{Routes: []string{route}, DoubtWait: events.IntakeDuplicates}, s.JS, s.NS, s.Res, s.Jobs)
	require.ErrorContains(t, err, "DoubtWait")
	_, err = frontdoor.New(frontdoor.Config{Routes: []string{route}, DoubtWait: events.IntakeDuplicates / 2}, s.JS, s.NS, s.Res, s.Jobs)
	require.NoError(t, err)
}
