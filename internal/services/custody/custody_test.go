package custody_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
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

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/custody"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Sizes of the simulated provider's outputs: a file of several object
// store chunks (128 KiB each), and one past the route's max_bytes.
const (
	fileSize = 300_000
	bigSize  = 3 << 20
	maxBytes = 1 << 20
)

// rig is a NATS server with Pollux's streams and the jobs' owner, and a
// simulated provider serving its outputs as files over HTTP — behind a
// gate that can hold the downloads.
type rig struct {
	t     *testing.T
	ctx   context.Context
	js    jetstream.JetStream
	res   *events.Resources
	owner *jobs.Owner
	sim   *sim.Server
	url   string

	mu        sync.Mutex
	held      chan struct{} // closed: downloads go on; nil: not held
	downloads atomic.Int32  // file requests received
	expiring  atomic.Int32  // Metrics.Expiring calls
}

func newRig(t *testing.T) *rig {
	t.Helper()
	s := stack.New(t, stack.Config{})
	return newRigOn(t, s.JS, s.Res)
}

// newRigOn is a rig on a NATS server of the test's.
func newRigOn(t *testing.T, js jetstream.JetStream, res *events.Resources) *rig {
	t.Helper()
	s, err := sim.New(sim.Config{
		Default:     sim.Model{QueueMedian: sim.Duration(time.Millisecond), RunMedian: sim.Duration(time.Millisecond)},
		Models:      map[string]sim.Model{"big/model": {QueueMedian: sim.Duration(time.Millisecond), RunMedian: sim.Duration(time.Millisecond), OutputBytes: bigSize}},
		OutputBytes: fileSize,
	})
	require.NoError(t, err)
	r := &rig{t: t, ctx: t.Context(), js: js, res: res, sim: s,
		owner: jobs.New(events.Default, js, res, jobs.Config{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/files/") {
			r.downloads.Add(1)
			r.mu.Lock()
			held := r.held
			r.mu.Unlock()
			if held != nil {
				select {
				case <-held:
				case <-req.Context().Done():
					return
				}
			}
		}
		s.Handler().ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// hold holds every download until the returned func is called.
func (r *rig) hold() (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.held = ch
	r.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// prediction makes a prediction of model at the simulated provider and
// waits until it succeeds; it returns its id and output URL.
func (r *rig) prediction(model string) (id, output string) {
	r.t.Helper()
	resp, err := http.Post(r.url+"/v1/models/"+model+"/predictions", "application/json", strings.NewReader(`{"input":{"prompt":"a kite"}}`))
	require.NoError(r.t, err)
	var p struct {
		ID     string   `json:"id"`
		Status string   `json:"status"`
		Output []string `json:"output"`
	}
	require.NoError(r.t, json.NewDecoder(resp.Body).Decode(&p))
	_ = resp.Body.Close()
	require.Eventually(r.t, func() bool {
		resp, err := http.Get(r.url + "/v1/predictions/" + p.ID)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&p) == nil && p.Status == sim.StatusSucceeded
	}, 10*time.Second, 5*time.Millisecond)
	require.Len(r.t, p.Output, 1)
	return p.ID, p.Output[0]
}

// finish tracks job id on route and ends it succeeded with outputs, as a
// webhook from the provider would.
func (r *rig) finish(route, id, remote string, outputs []string, expireAt time.Time) {
	r.t.Helper()
	now := time.Now().UTC()
	j := &state.Job{ID: id, Route: route, Model: "m", RemoteID: remote, State: state.Queued, Tracked: true,
		CreatedAt: now, SubmittedAt: now, ChangedAt: now, Deadline: now.Add(time.Hour), NextCheckAt: now.Add(time.Hour)}
	j.Record(events.EventSubmitted, now)
	_, created, err := r.owner.Intake().Accept(r.ctx, j)
	require.NoError(r.t, err)
	require.True(r.t, created)
	_, err = r.owner.Webhooks().Webhook(r.ctx, jobs.Notice{Route: route, JobID: id, DeliveryID: "d-" + id, RemoteID: remote,
		Obs: state.Observation{State: state.Succeeded, Raw: "succeeded", Outputs: outputs, OutputsExpireAt: expireAt}})
	require.NoError(r.t, err)
}

// run starts the service until the test ends (or stop is called); jobs
// that end before it runs are not its.
func (r *rig) run(tune ...func(*custody.Config)) (stop func()) {
	r.t.Helper()
	cfg := custody.Config{
		Routes:    map[string]config.KeepOutputs{"r": {MaxBytes: maxBytes, AllowPrivate: true}, "strict": {}},
		RetryBase: 50 * time.Millisecond, Drain: 200 * time.Millisecond,
		Logger:  zerolog.New(zerolog.NewTestWriter(r.t)).Level(zerolog.WarnLevel),
		Metrics: custody.Metrics{Expiring: func(string, bool) { r.expiring.Add(1) }},
	}
	for _, f := range tune {
		f(&cfg)
	}
	svc, err := custody.New(cfg, r.js, events.Default, r.owner.Custody())
	require.NoError(r.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	require.Eventually(r.t, func() bool {
		_, err := r.res.Events.Consumer(ctx, events.Default.Prefix()+"-custody-copy")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(r.t, <-done)
		})
	}
	r.t.Cleanup(stop)
	return stop
}

// saved waits until job id's custody is recorded and returns the job.
func (r *rig) saved(id string) *state.Job {
	r.t.Helper()
	var j *state.Job
	require.Eventually(r.t, func() bool {
		var err error
		j, err = r.owner.Get(r.ctx, id)
		return err == nil && j.Custody != nil && !j.Custody.SavedAt.IsZero()
	}, 30*time.Second, 20*time.Millisecond, "job %s's outputs recorded", id)
	return j
}

// requireEvents waits until job id's events are want, in order: a record
// is written before the events it carries are published.
func (r *rig) requireEvents(route, id string, want []string, msg string) {
	r.t.Helper()
	var got []string
	require.Eventually(r.t, func() bool {
		got = types(r.events(route, id))
		return slices.Equal(got, want)
	}, 10*time.Second, 20*time.Millisecond, "%s: events %v, want %v", msg, &got, want)
}

// events returns job id's events, in order.
func (r *rig) events(route, id string) []events.Event {
	r.t.Helper()
	c, err := r.res.Events.OrderedConsumer(r.ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.Default.Event(route, id)}})
	require.NoError(r.t, err)
	info, err := c.Info(r.ctx)
	require.NoError(r.t, err)
	var out []events.Event
	if info.NumPending == 0 {
		return nil
	}
	batch, err := c.Fetch(int(info.NumPending), jetstream.FetchMaxWait(5*time.Second))
	require.NoError(r.t, err)
	for m := range batch.Messages() {
		ev, err := events.DecodeEvent(m.Data())
		require.NoError(r.t, err)
		out = append(out, *ev)
	}
	return out
}

func types(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// objectStore opens the outputs bucket.
func (r *rig) objectStore() jetstream.ObjectStore {
	r.t.Helper()
	obs, err := r.js.ObjectStore(r.ctx, events.Default.OutputsBucket())
	require.NoError(r.t, err)
	return obs
}

// digest is the object store's digest of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
}

// A succeeded job's outputs are kept: streamed into the outputs bucket
// with their size and digest recorded, and the bytes are the provider's.
// One deleted at the provider before the copy is recorded gone; one
// larger than max_bytes is not kept and says so. Each job's
// outputs_saved comes after its terminal event.
func TestOutputsAreKept(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.run()
	okID, okURL := r.prediction("owner/model")
	goneID, goneURL := r.prediction("owner/model")
	bigID, bigURL := r.prediction("big/model")
	require.True(t, r.sim.DeleteOutput(goneID))
	expire := time.Now().Add(2 * time.Hour) // past the lead time: no warning yet
	r.finish("r", "ok", okID, []string{okURL}, expire)
	r.finish("r", "gone", goneID, []string{goneURL}, expire)
	r.finish("r", "big", bigID, []string{bigURL}, expire)

	j := r.saved("ok")
	want := sim.OutputFile(okID, fileSize)
	require.Len(t, j.Custody.Outputs, 1)
	o := j.Custody.Outputs[0]
	require.Equal(t, state.OutputSaved, o.Status, o.Reason)
	require.Equal(t, "ok/0", o.Object)
	require.EqualValues(t, fileSize, o.Size)
	require.Equal(t, digest(want), o.Digest, "the provider's bytes, checksummed")
	require.Equal(t, "video/mp4", o.ContentType)
	got, err := r.objectStore().GetBytes(r.ctx, "ok/0")
	require.NoError(t, err)
	require.True(t, string(want) == string(got), "byte for byte")

	o = r.saved("gone").Custody.Outputs[0]
	require.Equal(t, state.OutputGone, o.Status)
	require.Contains(t, o.Reason, "HTTP 404")
	require.Equal(t, 1, o.Attempts, "not retried")

	o = r.saved("big").Custody.Outputs[0]
	require.Equal(t, state.OutputTooLarge, o.Status)
	require.Contains(t, o.Reason, "max_bytes 1048576")
	require.Empty(t, o.Object)
	_, err = r.objectStore().GetInfo(r.ctx, "big/0")
	require.ErrorIs(t, err, jetstream.ErrObjectNotFound, "not kept")

	for _, id := range []string{"ok", "gone", "big"} {
		evs := r.events("r", id)
		require.Equal(t, []string{"submitted", "succeeded", "outputs_saved"}, types(evs), id)
		require.Equal(t, state.Succeeded, evs[2].State)
		require.NotNil(t, evs[2].Job.Custody, "the event carries what was kept")
	}
}

// An output larger than max_bytes whose size is not announced (no
// Content-Length: a chunked answer) is cut off at max_bytes as it
// streams, and nothing of it stays in the bucket.
func TestAnOversizedStreamIsCutOff(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "video/mp4")
		chunk := make([]byte, 64<<10)
		for range 64 { // 4 MiB, chunked
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	r.run()
	r.finish("r", "chunked", "rem-chunked", []string{srv.URL + "/out.mp4"}, time.Time{})
	o := r.saved("chunked").Custody.Outputs[0]
	require.Equal(t, state.OutputTooLarge, o.Status)
	_, err := r.objectStore().GetInfo(r.ctx, "chunked/0")
	require.ErrorIs(t, err, jetstream.ErrObjectNotFound)
	st, err := r.js.Stream(r.ctx, "OBJ_"+events.Default.OutputsBucket())
	require.NoError(t, err)
	info, err := st.Info(r.ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "its chunks are purged")
}

// The job's end is not held up by the copy: its terminal event is out,
// and Wait returns it, while the download is still held; outputs_saved
// follows once the copy is done.
func TestTheEndIsNotHeldUp(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.run()
	remote, url := r.prediction("owner/model")
	release := r.hold()
	defer release()
	r.finish("r", "job", remote, []string{url}, time.Now().Add(time.Hour))
	require.Eventually(t, func() bool { return r.downloads.Load() > 0 }, 10*time.Second, 5*time.Millisecond, "the copy started")
	require.Equal(t, []string{"submitted", "succeeded"}, types(r.events("r", "job")), "the end is out while the copy is held")
	j, err := r.owner.Get(r.ctx, "job")
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, j.State)
	require.Nil(t, j.Custody)
	release()
	r.saved("job")
	r.requireEvents("r", "job", []string{"submitted", "succeeded", "outputs_saved"}, "saved")
}

// A restart while a copy is under way loses nothing: the job stays in the
// work queue, and the next process copies it whole.
func TestARestartMidCopyLosesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	stop := r.run()
	remote, url := r.prediction("owner/model")
	release := r.hold()
	r.finish("r", "job", remote, []string{url}, time.Now().Add(time.Hour))
	require.Eventually(t, func() bool { return r.downloads.Load() > 0 }, 10*time.Second, 5*time.Millisecond, "the copy started")
	stop()
	j, err := r.owner.Get(r.ctx, "job")
	require.NoError(t, err)
	require.Nil(t, j.Custody, "nothing recorded by the stopped process")
	release()
	r.run()
	o := r.saved("job").Custody.Outputs[0]
	require.Equal(t, state.OutputSaved, o.Status, o.Reason)
	require.Equal(t, digest(sim.OutputFile(remote, fileSize)), o.Digest)
	r.requireEvents("r", "job", []string{"submitted", "succeeded", "outputs_saved"}, "recorded once")
}

// A download that fails is retried with backoff: an output the provider
// answers 503 for a while is kept once it answers.
func TestAFailingDownloadIsRetried(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header()["Content-Type"] = nil // no type, and none sniffed
		_, _ = io.WriteString(w, "the video")
	}))
	t.Cleanup(srv.Close)
	r.run()
	r.finish("r", "job", "rem", []string{srv.URL + "/v.webm"}, time.Now().Add(2*time.Hour))
	o := r.saved("job").Custody.Outputs[0]
	require.Equal(t, state.OutputSaved, o.Status, o.Reason)
	require.Equal(t, 4, o.Attempts)
	require.Equal(t, "video/webm", o.ContentType, "from its name when the answer has no type")
	require.EqualValues(t, len("the video"), o.Size)
}

// By default a download does not reach loopback or private addresses
// (the outbound webhooks' rule): such an output is recorded failed at
// once, with the reason, and never fetched.
func TestPrivateOutputsAreRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.run()
	remote, url := r.prediction("owner/model")
	r.finish("strict", "job", remote, []string{url}, time.Now().Add(time.Hour))
	o := r.saved("job").Custody.Outputs[0]
	require.Equal(t, state.OutputFailed, o.Status)
	require.Contains(t, o.Reason, "a loopback address")
	require.Zero(t, r.downloads.Load(), "never fetched")
}

// A job whose outputs expire unsaved gets outputs_expiring once, a lead
// time before they expire (not at once), on a route that keeps no
// outputs; a job whose outputs were saved gets none.
func TestOutputsExpiringUnsaved(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const lead = time.Second
	r.run(func(c *custody.Config) { c.ExpiringLead = lead })
	expire := time.Now().Add(lead + 2*time.Second)
	r.finish("w", "unsaved", "rem-1", []string{"https://example.invalid/a.mp4"}, expire)
	remote, url := r.prediction("owner/model")
	r.finish("r", "saved", remote, []string{url}, expire)
	r.finish("w", "forever", "rem-2", []string{"https://example.invalid/b.mp4"}, time.Time{})
	var evs []events.Event
	require.Eventually(t, func() bool {
		evs = r.events("w", "unsaved")
		return len(evs) == 3
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"submitted", "succeeded", "outputs_expiring"}, types(evs))
	require.False(t, evs[2].Time.Before(expire.Add(-lead).Truncate(time.Second)), "not before the lead time: %s", evs[2].Time)
	require.True(t, evs[2].Time.Before(expire), "before they expire")
	require.NotZero(t, evs[2].Job.Custody.ExpiringAt)
	require.EqualValues(t, 1, r.expiring.Load())

	r.saved("saved")
	require.Eventually(t, func() bool { return time.Now().After(expire) }, 10*time.Second, 50*time.Millisecond)
	r.requireEvents("r", "saved", []string{"submitted", "succeeded", "outputs_saved"}, "saved: no warning")
	require.Equal(t, []string{"submitted", "succeeded"}, types(r.events("w", "forever")), "no expiry: no warning")
	require.EqualValues(t, 1, r.expiring.Load(), "once")
}

// Recording twice changes nothing: the owner keeps the first record and
// publishes one event.
func TestRecordingIsOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.finish("w", "job", "rem", []string{"https://example.invalid/a.mp4"}, time.Now().Add(time.Hour))
	saved := []state.SavedOutput{{Index: 0, Status: state.OutputGone, Reason: "first"}}
	_, err := r.owner.Custody().SaveOutputs(r.ctx, "job", saved)
	require.NoError(t, err)
	j, err := r.owner.Custody().SaveOutputs(r.ctx, "job", []state.SavedOutput{{Index: 0, Status: state.OutputFailed, Reason: "second"}})
	require.NoError(t, err)
	require.Equal(t, "first", j.Custody.Outputs[0].Reason)
	warned, err := r.owner.Custody().OutputsExpiring(r.ctx, "job")
	require.NoError(t, err)
	require.False(t, warned, "a gone output cannot be saved: nothing to warn about")
	require.Equal(t, []string{"submitted", "succeeded", "outputs_saved"}, types(r.events("w", "job")))
	_, err = r.owner.Custody().SaveOutputs(r.ctx, "nope", saved)
	require.True(t, errors.Is(err, state.ErrNotFound), "%v", err)
}

// A job's pass that kept some outputs and failed on another retries only
// the failed one: a kept output is found in the bucket, not downloaded
// again.
func TestAKeptOutputIsNotDownloadedAgain(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var first, second atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/first.mp4" {
			first.Add(1)
			_, _ = io.WriteString(w, "first")
			return
		}
		if second.Add(1) <= 2 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, "second")
	}))
	t.Cleanup(srv.Close)
	r.run()
	r.finish("r", "job", "rem", []string{srv.URL + "/first.mp4", srv.URL + "/second.mp4"}, time.Now().Add(2*time.Hour))
	j := r.saved("job")
	require.Equal(t, state.OutputSaved, j.Custody.Outputs[0].Status)
	require.Equal(t, state.OutputSaved, j.Custody.Outputs[1].Status)
	require.EqualValues(t, 3, second.Load(), "the failing one, until it answered")
	require.EqualValues(t, 1, first.Load(), "the kept one, once")
	require.Equal(t, 1, j.Custody.Outputs[0].Attempts, "kept at the first pass")
	require.Equal(t, 3, j.Custody.Outputs[1].Attempts)
}

// opener is an adapter that opens its own outputs (provider.OutputOpener):
// those under its API's URL, with its credentials.
type opener struct {
	api    string
	opened atomic.Int32
}

func (o *opener) OpenOutput(ctx context.Context, url string) (io.ReadCloser, error) {
	if !strings.HasPrefix(url, o.api) {
		return nil, provider.ErrUnsupported
	}
	o.opened.Add(1)
	if strings.HasSuffix(url, "/gone") {
		return nil, &provider.Error{Class: provider.NotFound, HTTPStatus: http.StatusNotFound}
	}
	return io.NopCloser(strings.NewReader("from the adapter")), nil
}

// A route whose adapter opens its outputs has them downloaded through it
// (gone when it says so); an output it leaves alone is fetched by GET.
func TestAnAdapterOpensItsOutputs(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	o := &opener{api: "https://api.example/files/"}
	r.run(func(c *custody.Config) { c.Openers = map[string]provider.OutputOpener{"r": o} })
	remote, url := r.prediction("owner/model")
	r.finish("r", "job", remote, []string{o.api + "a.mp4", o.api + "gone", url}, time.Now().Add(2*time.Hour))
	out := r.saved("job").Custody.Outputs
	require.Equal(t, state.OutputSaved, out[0].Status, out[0].Reason)
	require.Equal(t, "video/mp4", out[0].ContentType)
	got, err := r.objectStore().GetBytes(r.ctx, "job/0")
	require.NoError(t, err)
	require.Equal(t, "from the adapter", string(got))
	require.Equal(t, state.OutputGone, out[1].Status)
	require.Equal(t, state.OutputSaved, out[2].Status, "fetched by GET")
	require.EqualValues(t, fileSize, out[2].Size)
	require.EqualValues(t, 2, o.opened.Load())
}

// A copy that keeps failing is retried until the outputs expire, warned
// about a lead time before (on a route that keeps them: kept="true"), and
// then recorded failed with its last answer.
func TestAFailingCopyIsGivenUpAtExpiry(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	var kept atomic.Bool
	r.run(func(c *custody.Config) {
		c.ExpiringLead = time.Second
		c.Metrics.Expiring = func(_ string, k bool) { kept.Store(k) }
	})
	expire := time.Now().Add(2 * time.Second)
	r.finish("r", "job", "rem", []string{srv.URL + "/v.mp4"}, expire)
	j := r.saved("job")
	o := j.Custody.Outputs[0]
	require.False(t, j.Custody.SavedAt.Before(j.OutputsExpireAt), "retried until the outputs expired")
	require.Equal(t, state.OutputFailed, o.Status)
	require.Contains(t, o.Reason, "given up at")
	require.Contains(t, o.Reason, "HTTP 503")
	require.Greater(t, calls.Load(), int32(3))
	r.requireEvents("r", "job", []string{"submitted", "succeeded", "outputs_expiring", "outputs_saved"}, "given up")
	require.True(t, kept.Load(), "counted as a kept route's")
}
