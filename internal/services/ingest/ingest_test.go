package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a provider whose submit answers come from a script per job (the
// last answer repeats), which keeps the jobs it created, and can find them
// by idempotency key when find is set.
type fake struct {
	mu         sync.Mutex
	idempotent bool
	answers    map[string][]error // by job id; nil: created
	creates    map[string]int
	jobs       map[string]string // idempotency key → remote id
	cancels    int
	byRemote   bool // its webhooks name only the remote job
}

func newFake() *fake {
	return &fake{answers: map[string][]error{}, creates: map[string]int{}, jobs: map[string]string{}}
}

func (f *fake) Info() provider.Info {
	return provider.Info{Kind: "fake", Idempotent: f.idempotent, Cancel: true, WebhooksByRemoteID: f.byRemote}
}

func (f *fake) Submit(_ context.Context, req provider.SubmitRequest) (provider.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.creates[req.JobID]
	f.creates[req.JobID] = n + 1
	var err error
	if a := f.answers[req.JobID]; len(a) > 0 {
		err = a[min(n, len(a)-1)]
	}
	created := err == nil || errors.Is(err, errLostAnswer)
	if _, ok := f.jobs[req.IdempotencyKey]; created && (!ok || !f.idempotent) {
		f.jobs[req.IdempotencyKey] = fmt.Sprintf("rem-%s-%d", req.JobID, n)
	}
	if err != nil {
		return provider.Status{}, err
	}
	return provider.Status{RemoteID: f.jobs[req.IdempotencyKey], Observation: state.Observation{State: state.Queued, Raw: "starting"}}, nil
}

func (f *fake) Status(context.Context, provider.Ref) (provider.Status, error) {
	return provider.Status{Observation: state.Observation{State: state.Running, Raw: "processing"}}, nil
}

func (f *fake) Cancel(context.Context, provider.Ref) (provider.Status, error) {
	f.mu.Lock()
	f.cancels++
	f.mu.Unlock()
	return provider.Status{Observation: state.Observation{State: state.Canceled, Raw: "canceled"}}, nil
}

func (f *fake) createsOf(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates[id]
}

// finder is a fake that can look its jobs up.
type finder struct{ *fake }

func (f finder) Find(_ context.Context, req provider.SubmitRequest) (provider.Status, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.AttemptedAt.IsZero() || req.AttemptEnded.Sub(req.AttemptedAt) != time.Second {
		return provider.Status{}, false, fmt.Errorf("%w: asked without the attempt's window (%v, %v)", provider.ErrCannotTell, req.AttemptedAt, req.AttemptEnded)
	}
	id, ok := f.jobs[req.IdempotencyKey]
	if !ok {
		return provider.Status{}, false, nil
	}
	return provider.Status{RemoteID: id, Observation: state.Observation{State: state.Running, Raw: "processing"}}, true, nil
}

// undecided is a provider that can be asked but whose answer cannot tell.
type undecided struct{ *fake }

func (undecided) Find(context.Context, provider.SubmitRequest) (provider.Status, bool, error) {
	return provider.Status{}, false, fmt.Errorf("%w: two predictions carry the job's webhook URL", provider.ErrCannotTell)
}

// errLostAnswer is a create the provider made whose answer never came.
var errLostAnswer = errors.New("read tcp: i/o timeout")

var errRefused = &provider.Error{Class: provider.Invalid, HTTPStatus: 422, Message: "prompt: too long"}

// rig runs ingest for route "fake" on a stack (internal/testkit/stack).
type rig struct {
	*stack.Stack
	t *testing.T
	// repaired counts the running slots the repair freed.
	repaired *atomic.Int64
}

func start(t *testing.T, a provider.Adapter, rc config.Route, tune func(*stack.Stack)) *rig {
	t.Helper()
	return startWith(t, a, rc, tune, nil)
}

// startWith is start with the ingest configuration changed by set.
func startWith(t *testing.T, a provider.Adapter, rc config.Route, tune func(*stack.Stack), set func(*ingest.Config)) *rig {
	t.Helper()
	st := stack.One(t, "fake", a, rc)
	if tune != nil {
		tune(st)
	}
	repaired := new(atomic.Int64)
	cfg := ingest.Config{Routes: st.Routes, Options: st.Options, RepairInterval: time.Second}
	cfg.Metrics.Repaired = func(_ string, n int) { repaired.Add(int64(n)) }
	if set != nil {
		set(&cfg)
	}
	svc, err := ingest.New(cfg, st.JS, st.NS, st.Res, st.Jobs.Intake(), st.Gates(route.GateConfig{CallTimeout: time.Second}))
	require.NoError(t, err)
	st.Go(svc.Run)
	return &rig{Stack: st, t: t, repaired: repaired}
}

// nothingRepaired asserts that every running slot was freed by the end of
// its job, none by the repair (which runs every second here, and would
// otherwise hide a slot the end left taken).
func (s *rig) nothingRepaired() {
	s.t.Helper()
	require.Zero(s.t, s.repaired.Load(), "running slots the repair had to free: an end left them taken")
}

func (s *rig) submit(id string) {
	s.t.Helper()
	s.Publish(s.NS.Submit("fake"), events.Submit{V: events.Version, ID: id, IdempotencyKey: "key-" + id, Model: "m", Input: json.RawMessage(`{}`)})
}

func (s *rig) intakeDone() {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		info, err := s.Res.Intake.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	}, 20*time.Second, 10*time.Millisecond, "the intake is handled")
}

func submitted(j *state.Job) bool { return j.RemoteID != "" && !j.SubmitInDoubt }

func TestSubmitOnceAndDeduplicate(t *testing.T) {
	t.Parallel()
	f := newFake()
	s := start(t, f, config.Route{}, nil)
	s.submit("a")
	s.submit("a")
	j := s.Until("a", submitted)
	s.intakeDone()
	require.Equal(t, 1, f.createsOf("a"), "one create for two submissions")
	require.Equal(t, state.Queued, j.State)
	require.Equal(t, 1, j.SubmitAttempts)
	v, err := s.Jobs.Check(context.Background(), "fake", "a")
	require.NoError(t, err)
	require.NotZero(t, v.Seq, "armed")
}

// A route's settings_from keys a job's learned durations by its input;
// a submission's own config_key wins.
func TestSettingsFromKeysTheJob(t *testing.T) {
	t.Parallel()
	s := start(t, newFake(), config.Route{SettingsFrom: []string{"resolution"}, LengthFrom: "duration"}, nil)
	s.Publish(s.NS.Submit("fake"), events.Submit{V: events.Version, ID: "derived", Model: "m", Input: json.RawMessage(`{"resolution":"1080p","duration":"8s"}`)})
	s.Publish(s.NS.Submit("fake"), events.Submit{V: events.Version, ID: "given", Model: "m", ConfigKey: "mine", Input: json.RawMessage(`{"resolution":"1080p"}`)})
	derived := s.Until("derived", submitted)
	require.Equal(t, "1080p", derived.ConfigKey)
	require.Equal(t, 8.0, derived.Length, "length_from: the requested length, on the record")
	given := s.Until("given", submitted)
	require.Equal(t, "mine", given.ConfigKey)
	require.Zero(t, given.Length, "no length in the input")
}

// A route with keep_inputs keeps a submitted job's input on its record
// (to resubmit it as it was); another route drops it once the provider
// has the job.
func TestKeepInputsKeepsTheInput(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{true, false} {
		s := start(t, newFake(), config.Route{KeepInputs: keep}, nil)
		s.Publish(s.NS.Submit("fake"), events.Submit{V: events.Version, ID: "kept", Model: "m", Input: json.RawMessage(`{"prompt":"kite"}`)})
		j := s.Until("kept", submitted)
		if keep {
			require.JSONEq(t, `{"prompt":"kite"}`, string(j.Input))
		} else {
			require.Empty(t, j.Input)
		}
	}
}

// A validation answer (400/422) to a create fails the job with the
// provider's message, and it is not tried again.
func TestARefusedCreateFailsTheJob(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.answers["b"] = []error{errRefused}
	s := start(t, f, config.Route{}, nil)
	s.submit("b")
	j := s.Until("b", func(j *state.Job) bool { return j.State.Terminal() })
	s.intakeDone()
	require.Equal(t, state.Failed, j.State)
	require.Contains(t, j.Reason, "prompt: too long")
	require.False(t, j.SubmitInDoubt)
	require.Equal(t, 1, f.createsOf("b"))
}

// Refused credentials on a create pause the route, fail no job, and the
// route resumes when they work again.
func TestAnAuthFailureOnACreatePausesTheRoute(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.answers["c"] = []error{&provider.Error{Class: provider.Auth, HTTPStatus: 401, Message: "bad token"}, nil}
	s := start(t, f, config.Route{}, func(env *stack.Stack) { env.Pauses.AuthBase = time.Second })
	s.submit("c")
	require.Eventually(t, func() bool { ps, ok := s.Pauses.Active("fake"); return ok && ps.Kind == route.PauseAuth },
		20*time.Second, 10*time.Millisecond)
	// The answer is recorded just after the pause is: the attempt is not
	// in doubt (nothing was created), and the job did not fail.
	j := s.Until("c", func(j *state.Job) bool { return j.LastError != "" && !j.SubmitInDoubt })
	require.False(t, j.State.Terminal(), "no job failed")
	require.Contains(t, j.LastError, "bad token")
	j = s.Until("c", submitted)
	require.Equal(t, 2, f.createsOf("c"))
	require.Equal(t, 2, j.SubmitAttempts)
}

// A create whose answer was lost, at a provider that can neither find
// the job nor deduplicate, is given up as lost: never a second create.
func TestInDoubtWithoutMeansIsLost(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.answers["d"] = []error{errLostAnswer}
	s := start(t, f, config.Route{}, nil)
	s.submit("d")
	j := s.Until("d", func(j *state.Job) bool { return j.State.Terminal() })
	require.Equal(t, state.Lost, j.State)
	require.Contains(t, j.Reason, "key-d")
	require.Contains(t, j.Reason, "cannot be asked for the job")
	require.Equal(t, 1, f.createsOf("d"), "no second create")
}

// A provider asked for a create in doubt whose answer cannot tell (two
// matches, too many to read) has the job lost, with what it said: never a
// second create.
func TestInDoubtTheProviderCannotTellIsLost(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.answers["u"] = []error{errLostAnswer}
	s := start(t, undecided{f}, config.Route{}, nil)
	s.submit("u")
	j := s.Until("u", func(j *state.Job) bool { return j.State.Terminal() })
	require.Equal(t, state.Lost, j.State)
	require.Contains(t, j.Reason, "was asked for the job but could not tell")
	require.Contains(t, j.Reason, "two predictions carry")
	require.Equal(t, 1, f.createsOf("u"), "no second create")
}

// A provider that cannot tell but deduplicates is simply asked again.
func TestInDoubtTheProviderCannotTellButDeduplicates(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.idempotent = true
	f.answers["v"] = []error{errLostAnswer, nil}
	s := start(t, undecided{f}, config.Route{}, nil)
	s.submit("v")
	j := s.Until("v", submitted)
	require.Equal(t, "rem-v-0", j.RemoteID, "the job the first create made")
}

// At a provider that deduplicates, a create in doubt is simply made again:
// the provider returns the job it has.
func TestInDoubtAtAnIdempotentProviderIsRetried(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.idempotent = true
	f.answers["e"] = []error{errLostAnswer, nil}
	s := start(t, f, config.Route{}, nil)
	s.submit("e")
	j := s.Until("e", submitted)
	require.Equal(t, "rem-e-0", j.RemoteID, "the job the first create made")
	require.Equal(t, 2, f.createsOf("e"))
}

// At a provider that can find what Pollux sent, a create in doubt is
// looked up once its call is surely over: found, it is followed without
// a second create.
func TestInDoubtIsFoundAtTheProvider(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.answers["g"] = []error{errLostAnswer}
	// CallTimeout 1s (start): the lookup comes 2 s after the attempt.
	s := start(t, finder{f}, config.Route{}, nil)
	s.submit("g")
	j := s.Until("g", submitted)
	require.Equal(t, "rem-g-0", j.RemoteID)
	require.Equal(t, state.Running, j.State, "as the lookup found it")
	require.Equal(t, 1, f.createsOf("g"), "found, not created again")
}

// A cancel before the submission is taken up cancels it instead; a cancel
// of a submitted job asks the provider.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := newFake()
	s := start(t, f, config.Route{}, nil)
	s.submit("h")
	s.Until("h", submitted)
	s.Publish(s.NS.Cancel("fake"), events.Cancel{V: events.Version, ID: "h", Reason: "no longer needed"})
	j := s.Until("h", func(j *state.Job) bool { return j.State.Terminal() })
	require.Equal(t, state.Canceled, j.State)
	require.Equal(t, "no longer needed", j.CancelReason)
	require.Equal(t, 1, f.cancels)
	// The check goes right after the write that ends the job.
	require.Eventually(t, func() bool {
		v, err := s.Jobs.Check(context.Background(), "fake", "h")
		return err == nil && v.Seq == 0
	}, 5*time.Second, 10*time.Millisecond, "its first poll was not due: the check goes at once")
}

// A rejected submission lands on the id its idempotency key gives, which
// the client can compute.
func TestARejectionLandsOnTheKeysJob(t *testing.T) {
	t.Parallel()
	s := start(t, newFake(), config.Route{}, nil)
	_, err := s.JS.Publish(s.Ctx(), s.NS.Submit("fake"), []byte(`{"v":1,"idempotency_key":"order-9","model":"","input":{}}`))
	require.NoError(t, err)
	id := events.KeyID("fake", "order-9")
	c, err := s.JS.OrderedConsumer(s.Ctx(), s.NS.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.NS.Event("fake", id)}})
	require.NoError(t, err)
	msg, err := c.Next(jetstream.FetchMaxWait(20 * time.Second))
	require.NoError(t, err)
	ev, err := events.DecodeEvent(msg.Data())
	require.NoError(t, err)
	require.Equal(t, events.EventRejected, ev.Type)
	require.Equal(t, "model", ev.Rejection.Field)
}

// An ingester whose second route cannot start returns with nothing of the
// first left running (goleak checks at the end of the package).
func TestRunFailingOnASecondRouteLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	f := newFake()
	s := stack.New(t, stack.Config{Adapters: map[string]provider.Adapter{"good": f, "bad": f}})
	// Something else holds the bad route's intake with an incompatible
	// consumer of the same name.
	_, err := s.Res.Intake.CreateConsumer(s.Ctx(), jetstream.ConsumerConfig{Durable: s.NS.IngestConsumer("bad"),
		FilterSubject: s.NS.Submit("bad"), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	svc, err := ingest.New(ingest.Config{Routes: s.Routes, Options: s.Options}, s.JS, s.NS, s.Res, s.Jobs.Intake(), s.Gates(route.GateConfig{}))
	require.NoError(t, err)
	var ie *events.IncompatibleError
	require.ErrorAs(t, svc.Run(s.Ctx()), &ie)
}

// A route capped at one running job: submissions wait for the slot
// (stored, visible, cancelable, never created), one whose deadline passes
// while it waits expires without a create, and the slot is freed by each
// kind of end — a cancel, a refused create — so the next job starts.
func TestRunningSlotsAdmitOneJobAtATime(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.answers["b"] = []error{errRefused}
	s := start(t, f, config.Route{Budgets: config.Budgets{Running: 1}}, nil)
	slots := func() uint64 {
		st, err := s.JS.Stream(s.Ctx(), s.NS.RunningStream(events.LevelRoute, "fake"))
		require.NoError(t, err)
		return st.CachedInfo().State.Msgs
	}
	s.submit("a")
	a := s.Until("a", submitted)
	require.Equal(t, []string{"fake"}, scopes(a), "the job names the slot it holds")
	s.submit("b")
	b, err := json.Marshal(events.Submit{V: events.Version, ID: "d", Model: "m", Input: json.RawMessage(`{}`), TimeoutS: 2})
	require.NoError(t, err)
	_, err = s.JS.Publish(s.Ctx(), s.NS.Submit("fake"), b)
	require.NoError(t, err)
	s.submit("e")
	for _, id := range []string{"b", "e"} {
		j := s.Until(id, func(j *state.Job) bool { return j.WaitingFor != "" })
		// Full, or behind others waiting for the slot (the submit workers
		// take the three at once).
		require.Contains(t, []string{"route fake", "queue fake"}, j.WaitingFor)
		require.Equal(t, state.Pending, j.State)
	}
	s.Publish(s.NS.Cancel("fake"), events.Cancel{V: events.Version, ID: "e", Reason: "not needed"})
	e := s.Until("e", func(j *state.Job) bool { return j.State.Terminal() })
	require.Equal(t, state.Canceled, e.State, "a waiting job is canceled without a create")
	d := s.Until("d", func(j *state.Job) bool { return j.State.Terminal() })
	require.Equal(t, state.Expired, d.State, "its deadline passed while it waited")
	require.Equal(t, 1, f.createsOf("a"))
	for _, id := range []string{"b", "d", "e"} {
		require.Zero(t, f.createsOf(id), "job %s waited: no create", id)
	}
	require.EqualValues(t, 1, slots())

	// a's cancel frees its slot: b starts, is refused, and frees it too.
	s.Publish(s.NS.Cancel("fake"), events.Cancel{V: events.Version, ID: "a"})
	b2 := s.Until("b", func(j *state.Job) bool { return j.State.Terminal() })
	require.Equal(t, state.Failed, b2.State)
	require.Empty(t, b2.Slots, "the end clears the slots it held")
	require.Equal(t, state.Canceled, s.Until("a", func(j *state.Job) bool { return j.State.Terminal() }).State)
	s.submit("c")
	c := s.Until("c", submitted)
	require.Equal(t, []string{"fake"}, scopes(c), "b's refused create freed the slot")
	s.intakeDone()
	require.EqualValues(t, 1, slots(), "c alone holds a slot")
	s.nothingRepaired()
}

func scopes(j *state.Job) []string {
	var out []string
	for _, sl := range j.Slots {
		out = append(out, sl.Scope)
	}
	return out
}

// The admission queue reports how many jobs wait and how long the oldest
// has; submissions that wait are counted by the level they found full.
func TestAdmissionQueueIsObserved(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	waiting, oldest, waits := 0, time.Duration(0), map[string]int{}
	s := startWith(t, newFake(), config.Route{Budgets: config.Budgets{Running: 1}}, nil, func(c *ingest.Config) {
		c.Metrics.Queue = func(queue string, n int, old time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, "fake", queue)
			waiting, oldest = n, old
		}
		c.Metrics.Waiting = func(level string) {
			mu.Lock()
			defer mu.Unlock()
			waits[level]++
		}
	})
	for _, id := range []string{"q1", "q2", "q3"} {
		s.submit(id)
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return waiting == 2 && oldest > time.Second
	}, 10*time.Second, 20*time.Millisecond, "two jobs wait (one runs), the oldest for over a second")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, waits["route fake"]+waits["queue fake"], "each waiting submission counted once")
}

// On a route whose provider's webhooks name only the remote job, a
// submitted job, and a tracked one, are in the remote index, by which the
// webhook receiver routes their deliveries; on other routes nothing is
// written.
func TestARemoteIDIsIndexedWhereWebhooksNeedIt(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.byRemote = true
	s := start(t, f, config.Route{}, nil)
	s.submit("a")
	j := s.Until("a", submitted)
	s.Publish(s.NS.Track("fake"), events.Track{V: events.Version, ID: "t", RemoteID: "elsewhere-1", Model: "m"})
	s.Until("t", func(j *state.Job) bool { return j.RemoteID != "" })
	for remote, id := range map[string]string{j.RemoteID: "a", "elsewhere-1": "t"} {
		require.Eventually(t, func() bool {
			got, err := s.Jobs.Webhooks().ByRemote(context.Background(), "fake", remote)
			return err == nil && got == id
		}, 10*time.Second, 10*time.Millisecond, "remote %s → job %s", remote, id)
	}

	plain := start(t, newFake(), config.Route{}, nil)
	plain.submit("b")
	jb := plain.Until("b", submitted)
	plain.intakeDone()
	_, err := plain.Jobs.Webhooks().ByRemote(context.Background(), "fake", jb.RemoteID)
	require.ErrorIs(t, err, state.ErrNotFound, "not indexed where no webhook needs it")
}

// A submission naming an endpoint of its own is rejected by name where
// the deployment does not call submissions' endpoints, and its URL is
// kept on the job where it does.
func TestANotifyURLNeedsTheDeploymentsConsent(t *testing.T) {
	t.Parallel()
	s := start(t, newFake(), config.Route{}, nil)
	s.Publish(s.NS.Submit("fake"), events.Submit{V: events.Version, ID: "n", Model: "m", Input: json.RawMessage(`{}`), NotifyURL: "https://app.example/hook"})
	require.Contains(t, s.rejection("fake", "n").Rejection.Error, "notify_url: this deployment does not call submissions' own endpoints")

	ok := startWith(t, newFake(), config.Route{}, nil, func(c *ingest.Config) { c.NotifyURLs = true })
	ok.Publish(ok.NS.Submit("fake"), events.Submit{V: events.Version, ID: "n", Model: "m", Input: json.RawMessage(`{}`), NotifyURL: "https://app.example/hook"})
	require.Equal(t, "https://app.example/hook", ok.Until("n", submitted).NotifyURL)
}

// A submission's app is its job's; one naming an app the configuration
// does not list is rejected by name, over NATS as through the front door;
// the same idempotency key in two apps is two jobs; a track request's app
// is its job's too, and another app's remote-id job is not its.
func TestASubmissionsAppIsItsJobs(t *testing.T) {
	t.Parallel()
	s := startWith(t, newFake(), config.Route{}, nil, func(c *ingest.Config) { c.Apps = []string{"studio", "rival"} })
	s.Publish(s.NS.Submit("fake"), events.Submit{V: events.Version, ID: "x", Model: "m", Input: json.RawMessage(`{}`), App: "nobody"})
	require.Contains(t, s.rejection("fake", "x").Rejection.Error, `app: "nobody" is not one of the configured apps`)

	s.Publish(s.NS.Submit("fake"), events.Submit{V: events.Version, IdempotencyKey: "k", Model: "m", Input: json.RawMessage(`{}`), App: "studio"})
	s.Publish(s.NS.Submit("fake"), events.Submit{V: events.Version, IdempotencyKey: "k", Model: "m", Input: json.RawMessage(`{}`), App: "rival"})
	require.Equal(t, "studio", s.Until(events.AppKeyID("fake", "studio", "k"), submitted).App)
	require.Equal(t, "rival", s.Until(events.AppKeyID("fake", "rival", "k"), submitted).App)
	require.NotEqual(t, events.AppKeyID("fake", "studio", "k"), events.AppKeyID("fake", "rival", "k"))
	require.Equal(t, events.KeyID("fake", "k"), events.AppKeyID("fake", "", "k"), "a job of no app keeps its id")

	s.Publish(s.NS.Track("fake"), events.Track{V: events.Version, ID: "t", RemoteID: "rem-t", Model: "m", App: "studio"})
	require.Equal(t, "studio", s.Until("t", func(j *state.Job) bool { return j.Tracked }).App)
	s.Publish(s.NS.Track("fake"), events.Track{V: events.Version, ID: "t", RemoteID: "rem-t", Model: "m", App: "rival"})
	c, err := s.JS.OrderedConsumer(s.Ctx(), s.NS.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.NS.Event("fake", "t")}, DeliverPolicy: jetstream.DeliverLastPolicy})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		msg, err := c.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return false
		}
		ev, err := events.DecodeEvent(msg.Data())
		return err == nil && ev.Type == events.EventRejected && strings.Contains(ev.Rejection.Error, "id: already used by another job")
	}, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, "studio", s.Until("t", func(j *state.Job) bool { return j.Tracked }).App, "still the first app's")
}

// A submission over NATS that would pass its app's budget is rejected,
// the rejection saying the budget, what is spent and when it resets (in
// its message and as fields), naming the app; one
// within it is submitted; its redelivered duplicate costs nothing more.
func TestASubmissionOverItsAppsBudgetIsRejected(t *testing.T) {
	t.Parallel()
	var keeper *spend.Keeper
	s := startWith(t, newFake(), config.Route{}, func(st *stack.Stack) {
		keeper = spend.New(spend.Config{
			Prices:  map[string]spend.Prices{"fake": {ByModel: map[string]spend.Price{"m": {Per: spend.PerJob, Amount: 3}}}},
			Budgets: map[string]spend.Budget{"studio": {Day: 5}},
		}, st.Res.Spend)
	}, func(c *ingest.Config) { c.Spend = keeper })
	sub := func(id string) events.Submit {
		return events.Submit{V: events.Version, ID: id, Model: "m", Input: json.RawMessage(`{}`), App: "studio"}
	}
	s.Publish(s.NS.Submit("fake"), sub("a"))
	s.Until("a", submitted)
	s.Publish(s.NS.Submit("fake"), sub("a"))
	s.Publish(s.NS.Submit("fake"), sub("b"))
	rej := s.rejection("fake", "b").Rejection
	require.Equal(t, "app", rej.Field)
	require.Contains(t, rej.Error, "app studio has spent its day budget: 3 of 5 counted (this job's estimate 3); it resets at ")
	require.Equal(t, "studio", rej.App)
	midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	require.Equal(t, &events.RejectedBudget{Of: "app studio", Period: "day", Budget: 5, Spent: 3, Estimate: 3, ResetsAt: midnight}, rej.Budget,
		"the budget, what is spent and when it resets, as fields")
	day, _, err := keeper.Ledger().Spent(context.Background(), "studio", time.Now())
	require.NoError(t, err)
	require.InDelta(t, 3, day, 1e-9, "the duplicate of a costs nothing more")
}
