package facetest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The fake stands for the front door in every face's tests, so it is held
// here to what face.Pollux promises.

const route = "sim"

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func submission(id string) events.Submit {
	return events.Submit{V: events.Version, ID: id, IdempotencyKey: "k-" + id, Model: "acme/video",
		Input: json.RawMessage(`{"prompt":"p"}`), Metadata: map[string]string{"face": "test"}}
}

func request(t *testing.T) *http.Request {
	return httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", nil)
}

// waited is what a Wait returned.
type waited struct {
	j   *state.Job
	err error
}

// wait runs Wait in the background and returns once the fake has
// announced it, so the test changes records only while it waits.
func wait(ctx context.Context, t *testing.T, p *facetest.Pollux, id string, done func(*state.Job) bool) <-chan waited {
	t.Helper()
	got := make(chan waited, 1)
	go func() {
		j, err := p.Wait(ctx, id, done)
		got <- waited{j, err}
	}()
	select {
	case waiting := <-p.Waits():
		require.Equal(t, id, waiting)
	case <-time.After(30 * time.Second):
		t.Fatal("Wait was not announced")
	}
	return got
}

func await(t *testing.T, got <-chan waited) *state.Job {
	t.Helper()
	select {
	case w := <-got:
		require.NoError(t, w.err)
		return w.j
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}

// A submission is recorded and becomes a pending record of what it
// carried, stamped by the clock; the same id again changes nothing.
func TestSubmitMakesOnePendingRecord(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	p.Clock(func() time.Time { return epoch.In(time.FixedZone("x", 3600)) })
	m := submission("a")
	require.NoError(t, p.Submit(t.Context(), request(t), route, m))
	j, err := p.Job(t.Context(), "a")
	require.NoError(t, err)
	require.Equal(t, state.Pending, j.State)
	require.Equal(t, route, j.Route)
	require.Equal(t, m.Model, j.Model)
	require.JSONEq(t, string(m.Input), string(j.Input))
	require.Equal(t, m.Metadata, j.Metadata)
	require.Equal(t, m.IdempotencyKey, j.IdempotencyKey)
	require.Equal(t, epoch, j.CreatedAt, "the clock's time, in UTC")

	p.Update("a", func(j *state.Job) { j.State = state.Running })
	require.NoError(t, p.Submit(t.Context(), request(t), route, m), "a retried submission is durable")
	j, err = p.Job(t.Context(), "a")
	require.NoError(t, err)
	require.Equal(t, state.Running, j.State, "never created twice")
	require.Len(t, p.Submissions(), 2)
	require.Equal(t, m, p.Submissions()[1])
}

// A submission the contract refuses is the front door's 400 naming the
// field (a *face.Error wrapping the *events.FieldError); nothing is
// taken.
func TestSubmitRefusesAContractViolation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		edit  func(*events.Submit)
		field string
	}{
		{"no id", func(m *events.Submit) { m.ID = "" }, "id"},
		{"bad id", func(m *events.Submit) { m.ID = "a/b" }, "id"},
		{"no model", func(m *events.Submit) { m.Model = "" }, "model"},
		{"input not an object", func(m *events.Submit) { m.Input = json.RawMessage(`[1]`) }, "input"},
		{"version", func(m *events.Submit) { m.V = 2 }, "v"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := facetest.New()
			m := submission("a")
			c.edit(&m)
			err := p.Submit(t.Context(), request(t), route, m)
			var fe *events.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, c.field, fe.Field)
			var e *face.Error
			require.ErrorAs(t, err, &e, "the front door's refusal")
			require.Equal(t, http.StatusBadRequest, e.Status)
			require.Equal(t, c.field, e.Field)
			require.Empty(t, p.Submissions())
			_, err = p.Job(t.Context(), m.ID)
			require.ErrorIs(t, err, state.ErrNotFound)
		})
	}
}

// FailSubmit makes Submit fail, taking nothing, until it is cleared.
func TestFailSubmit(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	p.FailSubmit(facetest.ErrUnavailable)
	require.ErrorIs(t, p.Submit(t.Context(), request(t), route, submission("a")), facetest.ErrUnavailable)
	require.Empty(t, p.Submissions())
	_, err := p.Job(t.Context(), "a")
	require.ErrorIs(t, err, state.ErrNotFound)

	p.FailSubmit(nil)
	require.NoError(t, p.Submit(t.Context(), request(t), route, submission("a")))
	_, err = p.Job(t.Context(), "a")
	require.NoError(t, err)
}

// Hold keeps a durable submission's record from being made.
func TestHold(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	p.Hold(true)
	require.NoError(t, p.Submit(t.Context(), request(t), route, submission("a")))
	require.Len(t, p.Submissions(), 1, "durable")
	_, err := p.Job(t.Context(), "a")
	require.ErrorIs(t, err, state.ErrNotFound, "not taken by ingest yet")

	p.Hold(false)
	require.NoError(t, p.Submit(t.Context(), request(t), route, submission("b")))
	_, err = p.Job(t.Context(), "b")
	require.NoError(t, err)
}

// Job of an unknown id is state.ErrNotFound; a record read shares nothing
// with the stored one, or with the one Put stored.
func TestJob(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	_, err := p.Job(t.Context(), "nobody")
	require.ErrorIs(t, err, state.ErrNotFound)

	put := &state.Job{ID: "a", Route: route, State: state.Succeeded, Outputs: []string{"https://x/1"},
		Metadata: map[string]string{"k": "v"}}
	p.Put(put)
	put.Outputs[0], put.Metadata["k"] = "changed", "changed"
	j, err := p.Job(t.Context(), "a")
	require.NoError(t, err)
	j.Outputs[0], j.Metadata["k"] = "changed", "changed"
	j, err = p.Job(t.Context(), "a")
	require.NoError(t, err)
	require.Equal(t, []string{"https://x/1"}, j.Outputs)
	require.Equal(t, map[string]string{"k": "v"}, j.Metadata)
}

// Wait returns at once when done holds already, and otherwise once a
// change makes it hold; each call is announced on Waits.
func TestWaitReturnsOnceDoneHolds(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	p.Put(&state.Job{ID: "a", Route: route, State: state.Running})
	j, err := p.Wait(t.Context(), "a", func(j *state.Job) bool { return j.State == state.Running })
	require.NoError(t, err)
	require.Equal(t, state.Running, j.State)
	require.Equal(t, "a", <-p.Waits())

	got := wait(t.Context(), t, p, "a", func(j *state.Job) bool { return j.State.Terminal() })
	p.Update("a", func(j *state.Job) { j.ProviderStatus = "processing" })
	p.Update("a", func(j *state.Job) { j.State = state.Succeeded })
	j = await(t, got)
	require.NotNil(t, j)
	require.Equal(t, state.Succeeded, j.State)

	// A record that comes while Wait waits for it.
	got = wait(t.Context(), t, p, "b", func(*state.Job) bool { return true })
	p.Put(&state.Job{ID: "b", Route: route, State: state.Pending})
	j = await(t, got)
	require.NotNil(t, j)
	require.Equal(t, "b", j.ID)
}

// When ctx ends first, Wait returns the latest record, or
// state.ErrNotFound when there is none.
func TestWaitUntilCtxEnds(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	j, err := p.Wait(ctx, "a", func(*state.Job) bool { return true })
	require.ErrorIs(t, err, state.ErrNotFound)
	require.Nil(t, j)

	p.Put(&state.Job{ID: "a", Route: route, State: state.Pending})
	seen := make(chan state.State, 16)
	ctx, cancel = context.WithCancel(t.Context())
	got := wait(ctx, t, p, "a", func(j *state.Job) bool { seen <- j.State; return false })
	p.Update("a", func(j *state.Job) { j.State = state.Running })
	for s := state.Pending; s != state.Running; {
		select {
		case s = <-seen:
		case <-time.After(30 * time.Second):
			t.Fatal("Wait did not read the change")
		}
	}
	cancel()
	j = await(t, got)
	require.NotNil(t, j, "the latest record")
	require.Equal(t, state.Running, j.State)
}

// Waits drops announcements nobody reads rather than block a Wait.
func TestWaitsNeverBlocks(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	p.Put(&state.Job{ID: "a", Route: route, State: state.Pending})
	waited := make(chan error, 1)
	go func() {
		for range 200 {
			if _, err := p.Wait(t.Context(), "a", func(*state.Job) bool { return true }); err != nil {
				waited <- err
				return
			}
		}
		waited <- nil
	}()
	select {
	case err := <-waited:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Wait blocked on its announcement")
	}
}

// Cancel of an ended job is face.ErrTerminal, and nothing is recorded;
// otherwise the cancel is recorded, and ends the job only with
// CancelEnds, at the clock's time, waking the waiters.
func TestCancel(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	p.Clock(func() time.Time { return epoch })
	done := &state.Job{ID: "done", Route: route, State: state.Succeeded}
	require.ErrorIs(t, p.Cancel(t.Context(), request(t), done, "r"), face.ErrTerminal, "j has ended")
	require.Empty(t, p.Cancels())

	run := &state.Job{ID: "run", Route: route, State: state.Running}
	p.Put(run)
	require.NoError(t, p.Cancel(t.Context(), request(t), run, "r"))
	j, err := p.Job(t.Context(), "run")
	require.NoError(t, err)
	require.Equal(t, state.Running, j.State, "asked for, not ended")
	require.Equal(t, []string{"run"}, p.Cancels())

	p.CancelEnds(true)
	got := wait(t.Context(), t, p, "run", func(j *state.Job) bool { return j.State.Terminal() })
	require.NoError(t, p.Cancel(t.Context(), request(t), run, "r"))
	j = await(t, got)
	require.NotNil(t, j)
	require.Equal(t, state.Canceled, j.State)
	require.Equal(t, epoch, j.CompletedAt)
	require.Equal(t, []string{"run", "run"}, p.Cancels())

	// run is now stale: its record has ended since it was read.
	require.ErrorIs(t, p.Cancel(t.Context(), request(t), run, "r"), face.ErrTerminal)
	require.Equal(t, []string{"run", "run"}, p.Cancels())
}

// A cancel of a job whose record ended since the face read it is
// face.ErrTerminal, and leaves the ending alone.
func TestCancelOfAJobThatEndedMeanwhile(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	p.CancelEnds(true)
	p.Put(&state.Job{ID: "a", Route: route, State: state.Running})
	stale, err := p.Job(t.Context(), "a")
	require.NoError(t, err)
	p.Update("a", func(j *state.Job) { j.State = state.Succeeded })
	require.ErrorIs(t, p.Cancel(t.Context(), request(t), stale, "r"), face.ErrTerminal)
	j, err := p.Job(t.Context(), "a")
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, j.State)
	require.Empty(t, p.Cancels())
}

// Output of an index the job has is a redirect to it, or its proxied
// bytes when proxy; of one it has not, face.ErrOutputNotFound with
// nothing written.
func TestOutput(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	j := &state.Job{ID: "a", Route: route, State: state.Succeeded, Outputs: []string{"https://x/0", "https://x/1", "javascript:alert(1)", "/relative"}}
	w := httptest.NewRecorder()
	require.NoError(t, p.Output(w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil), j, 1, false))
	require.Equal(t, http.StatusFound, w.Code)
	require.Equal(t, "https://x/1", w.Header().Get("Location"))
	w = httptest.NewRecorder()
	require.NoError(t, p.Output(w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil), j, 1, true))
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "proxied https://x/1", w.Body.String())

	for _, n := range []int{-1, 2, 3, 4} {
		var w untouched
		err := p.Output(&w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil), j, n, true)
		require.ErrorIs(t, err, face.ErrOutputNotFound, "output %d", n)
		require.False(t, w.touched, "output %d: nothing written", n)
	}
}

// untouched is a ResponseWriter that notes any use.
type untouched struct {
	touched bool
	h       http.Header
}

func (w *untouched) Header() http.Header {
	w.touched = true
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}

func (w *untouched) Write(b []byte) (int, error) {
	w.touched = true
	return len(b), nil
}

func (w *untouched) WriteHeader(int) { w.touched = true }

// List is the face's records on the route (or routed through it), newest
// first, after an id, at most limit; an unknown after is ErrNoSuchJob.
func TestList(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mine := map[string]string{"face": string(face.OpenAI)}
	p.Put(&state.Job{ID: "a", Route: "sim", CreatedAt: at, Metadata: mine})
	p.Put(&state.Job{ID: "b", Route: "member", Routing: &state.Routing{Via: "sim"}, CreatedAt: at.Add(time.Second), Metadata: mine})
	p.Put(&state.Job{ID: "c", Route: "sim", CreatedAt: at.Add(2 * time.Second), Metadata: mine})
	p.Put(&state.Job{ID: "other-face", Route: "sim", CreatedAt: at, Metadata: map[string]string{"face": string(face.Fal)}})
	p.Put(&state.Job{ID: "no-face", Route: "sim", CreatedAt: at})
	p.Put(&state.Job{ID: "other-route", Route: "other", CreatedAt: at, Metadata: mine})

	ids := func(jobs []*state.Job) (out []string) {
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	jobs, more, err := p.List(t.Context(), face.OpenAI, "sim", "", 2)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "b"}, ids(jobs))
	require.True(t, more)
	jobs, more, err = p.List(t.Context(), face.OpenAI, "sim", "b", 2)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids(jobs))
	require.False(t, more)
	_, _, err = p.List(t.Context(), face.OpenAI, "sim", "no-face", 2)
	require.ErrorIs(t, err, face.ErrNoSuchJob)

	jobs[0].Metadata["face"] = "changed"
	again, _, err := p.List(t.Context(), face.OpenAI, "sim", "b", 2)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids(again), "a listed record is a copy")
}
