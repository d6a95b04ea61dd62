package webhook_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/webhook"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// early is a webhook service on a fresh server with a clock the test can
// move, counting the deliveries it drops.
type early struct {
	owner   *jobs.Owner
	res     *events.Resources
	url     string
	offset  atomic.Int64
	mu      sync.Mutex
	dropped map[string]int
}

func startEarly(t *testing.T) *early {
	t.Helper()
	s := stack.New(t, stack.Config{})
	e := &early{owner: s.Jobs, res: s.Res, dropped: map[string]int{}}
	svc, err := webhook.New(webhook.Config{
		Routes: map[string]*route.Route{"rep": repRoute(t, config.Route{})},
		Now:    func() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) },
		Metrics: webhook.Metrics{Dropped: func(_, reason string) {
			e.mu.Lock()
			e.dropped[reason]++
			e.mu.Unlock()
		}},
	}, s.JS, s.NS, s.Res, e.owner.Webhooks())
	require.NoError(t, err)
	e.url = serve(t, svc) + "/webhooks/rep?job="
	return e
}

func (e *early) drops(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropped[reason]
}

// A provider may call back before it answers the create: the delivery is
// genuine, but the job's record does not know its remote id yet. It is
// kept and retried, and applies once the answer is recorded — the job is
// detected by the webhook, its polling stopped at once.
func TestAnEarlyDeliveryIsHeldUntilItApplies(t *testing.T) {
	t.Parallel()
	e := startEarly(t)
	ctx := context.Background()
	now := time.Now().UTC()
	rec, created, err := e.owner.Intake().Accept(ctx, &state.Job{ID: "job-1", Route: "rep", Model: "m", State: state.Pending,
		WebhookExpected: true, CreatedAt: now, SubmitAttempts: 1, SubmitInDoubt: true, AttemptedAt: now, AttemptID: "a"})
	require.NoError(t, err)
	require.True(t, created)

	code, _, _ := do(t, signedRequest(t, e.url+"job-1", "msg_1", time.Now(), prediction))
	require.Equal(t, http.StatusOK, code, "stored: the provider is answered at once")
	require.Never(t, func() bool {
		j, err := e.owner.Get(ctx, "job-1")
		return err != nil || j.State.Terminal()
	}, 500*time.Millisecond, 50*time.Millisecond, "not applicable yet: held")

	_, err = e.owner.Intake().Submitted(ctx, rec, jobs.Created{RemoteID: "p1", Due: time.Now().Add(time.Hour),
		Obs: state.Observation{State: state.Queued, Source: state.FromSubmit, At: time.Now().UTC()}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		j, err := e.owner.Get(ctx, "job-1")
		return err == nil && j.State == state.Succeeded
	}, 20*time.Second, 20*time.Millisecond, "applied once the create's answer is recorded")
	j, err := e.owner.Get(ctx, "job-1")
	require.NoError(t, err)
	require.Equal(t, state.FromWebhook, j.DetectedBy)
	// The record's end is written before its check goes; no poller runs
	// here, so only the delivery's applier can remove it.
	require.Eventually(t, func() bool {
		v, err := e.owner.Check(ctx, "rep", "job-1")
		return err == nil && v.Seq == 0
	}, 5*time.Second, 10*time.Millisecond, "polling stopped by the delivery")
	require.Zero(t, e.drops("unknown_job"))
}

// A delivery no job takes within its hold window is dropped, logged and
// counted; one about another job than its URL names, at once.
func TestADeliveryNoJobTakesIsDroppedAfterItsWindow(t *testing.T) {
	t.Parallel()
	e := startEarly(t)
	ctx := context.Background()
	code, _, _ := do(t, signedRequest(t, e.url+"nobody", "msg_2", time.Now(), prediction))
	require.Equal(t, http.StatusOK, code)
	require.Never(t, func() bool { return e.drops("unknown_job") > 0 }, 300*time.Millisecond, 20*time.Millisecond, "held first")
	e.offset.Store(int64(3 * time.Minute)) // the window passes
	require.Eventually(t, func() bool { return e.drops("unknown_job") == 1 }, 20*time.Second, 20*time.Millisecond)

	track(t, e.owner, &state.Job{ID: "job-3", Route: "rep", RemoteID: "p-other", State: state.Running, WebhookExpected: true,
		NextCheckAt: time.Now().Add(time.Hour)})
	code, _, _ = do(t, signedRequest(t, e.url+"job-3", "msg_3", time.Now(), prediction))
	require.Equal(t, http.StatusOK, code)
	require.Eventually(t, func() bool { return e.drops("mismatch") == 1 }, 20*time.Second, 20*time.Millisecond,
		"prediction p1 is not job-3's")
	j, err := e.owner.Get(ctx, "job-3")
	require.NoError(t, err)
	require.Equal(t, state.Running, j.State)
	require.Eventually(t, func() bool {
		info, err := e.res.Webhooks.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 10*time.Second, 20*time.Millisecond, "nothing left stored")
}
