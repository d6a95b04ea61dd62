package face_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The configuration accepts exactly the faces there are.
func TestConfigNamesEveryFace(t *testing.T) {
	var kinds []string
	for _, k := range face.Kinds {
		kinds = append(kinds, string(k))
		require.True(t, k.Valid())
	}
	require.Equal(t, kinds, config.FaceKinds)
	require.False(t, face.Kind("kling").Valid())
}

// A key makes the same id on the same route and face, another id
// elsewhere; no key, a new id each time.
func TestIDBytes(t *testing.T) {
	a := face.IDBytes(context.Background(), face.Replicate, "sim", "k", 16)
	require.Equal(t, a, face.IDBytes(context.Background(), face.Replicate, "sim", "k", 16))
	require.NotEqual(t, a, face.IDBytes(context.Background(), face.Replicate, "other", "k", 16), "the route is part of the id")
	require.NotEqual(t, a, face.IDBytes(context.Background(), face.Fal, "sim", "k", 16), "the face is part of the id")
	require.NotEqual(t, a, face.IDBytes(context.Background(), face.Replicate, "sim", "k2", 16))
	require.NotEqual(t, face.IDBytes(context.Background(), face.Replicate, "sim", "", 16), face.IDBytes(context.Background(), face.Replicate, "sim", "", 16))
}

func TestIdempotencyKeyIsBounded(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	key, err := face.IdempotencyKey(r)
	require.NoError(t, err)
	require.Empty(t, key)
	r.Header.Set("Idempotency-Key", "order-42")
	key, err = face.IdempotencyKey(r)
	require.NoError(t, err)
	require.Equal(t, "order-42", key)
	r.Header.Set("Idempotency-Key", strings.Repeat("k", 257))
	_, err = face.IdempotencyKey(r)
	var e *face.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.Equal(t, "Idempotency-Key", e.Field)
}

// PollAfter is Pollux's own next check, bounded; nothing once the job
// has ended.
func TestPollAfter(t *testing.T) {
	now := time.Now()
	j := &state.Job{State: state.Running, NextCheckAt: now.Add(3 * time.Second)}
	require.Equal(t, 3*time.Second, face.PollAfter(j, now, time.Second, 10*time.Second))
	j.NextCheckAt = now.Add(time.Minute)
	require.Equal(t, 10*time.Second, face.PollAfter(j, now, time.Second, 10*time.Second))
	j.NextCheckAt = now.Add(-time.Minute)
	require.Equal(t, time.Second, face.PollAfter(j, now, time.Second, 10*time.Second))
	j.State = state.Succeeded
	require.Zero(t, face.PollAfter(j, now, time.Second, 10*time.Second))
	require.Equal(t, time.Second, face.PollAfter(nil, now, time.Second, 10*time.Second))
}

// The kit's lookup waits the mount's grace for a record that does not
// exist yet: one that comes meanwhile is read, and none is the face's
// NotFound (state.ErrNotFound) once the grace is over.
func TestJobWaitsForARecordToCome(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	k := face.NewKit(face.Mount{Kind: face.Replicate, Route: "sim", RecordGrace: time.Minute}, p, shape{})
	got := make(chan *state.Job, 1)
	go func() {
		j, err := k.Job(get(t), "late")
		if err != nil {
			j = nil
		}
		got <- j
	}()
	select {
	case w := <-p.Waits():
		require.Equal(t, "late", w)
	case j := <-got:
		t.Fatalf("returned %v without waiting for the record", j)
	}
	p.Put(&state.Job{ID: "late", Route: "sim", State: state.Pending, Metadata: map[string]string{face.MetaFace: "replicate"}})
	select {
	case j := <-got:
		require.NotNil(t, j)
		require.Equal(t, "late", j.ID)
	case <-time.After(20 * time.Second):
		t.Fatal("the record came and was not read")
	}

	k = face.NewKit(face.Mount{Kind: face.Replicate, Route: "sim", RecordGrace: 20 * time.Millisecond}, p, shape{})
	_, err := k.Job(get(t), "never")
	require.ErrorIs(t, err, state.ErrNotFound)
	var e *face.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "no_such_thing", e.Code, "the face's own NotFound")
}

// Through an outage a poll is answered from what the kit last knew: a
// record whose next check is at least face.OutagePollAfter away, and a
// create answered before its record existed; any other verb, and an id it
// knows nothing of, is the 503.
func TestPollAnswersWhatItLastKnew(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := facetest.New()
	k := face.NewKit(face.Mount{Kind: face.Replicate, Route: "sim", RecordGrace: time.Millisecond, Now: func() time.Time { return now }}, p, shape{})
	md := map[string]string{face.MetaFace: "replicate"}
	p.Put(&state.Job{ID: "overdue", Route: "sim", State: state.Running, Metadata: md, NextCheckAt: now.Add(-time.Minute)})
	p.Put(&state.Job{ID: "later", Route: "sim", State: state.Queued, Metadata: md, NextCheckAt: now.Add(time.Minute)})
	p.Hold(true)
	m := events.Submit{V: events.Version, ID: "created", Model: "acme/video", Input: []byte(`{}`), Metadata: md}
	require.NoError(t, k.Submit(get(t), m))
	created, err := k.Created(t.Context(), m, now)
	require.NoError(t, err)
	require.Equal(t, state.Pending, created.State, "answered from the create")
	p.Outage(true)

	for id, want := range map[string]time.Time{"overdue": now.Add(face.OutagePollAfter), "later": now.Add(time.Minute), "created": now.Add(face.OutagePollAfter)} {
		j, err := k.Poll(get(t), id)
		require.NoError(t, err, id)
		require.Equal(t, want, j.NextCheckAt, id)
		_, err = k.Job(get(t), id)
		var e *face.Error
		require.ErrorAs(t, err, &e, id)
		require.Equal(t, http.StatusServiceUnavailable, e.Status, "%s: any other verb is the 503", id)
	}
	_, err = k.Poll(get(t), "unknown")
	var e *face.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusServiceUnavailable, e.Status, "an id it knows nothing of")
}

// shape is a face's shape for the kit's tests: its NotFound says
// no_such_thing, and it mints ids that do not start with "x".
type shape struct{}

func (shape) WriteError(w http.ResponseWriter, e *face.Error) {
	_ = face.WriteJSON(w, e.Status, map[string]string{"shape_error": e.Code})
}

func (shape) NotFound(id string) *face.Error {
	return &face.Error{Status: http.StatusNotFound, Code: "no_such_thing", Message: "no " + id}
}

func (shape) Mints(id string) bool { return !strings.HasPrefix(id, "x") }

func get(t *testing.T) *http.Request {
	return httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil)
}

// testFace is a face of shape for Serve's tests.
type testFace struct {
	*face.Kit
	shape
}

func (testFace) Handler() http.Handler { return http.NotFoundHandler() }

// Serve writes what a handler returns in the face's shape: a *Error as
// it says, wrapped or not; anything else logged and answered 503.
func TestServe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		err    error
		status int
		code   string
		logged bool
	}{
		{"answered", nil, http.StatusTeapot, "", false},
		{"a face's error", &face.Error{Status: http.StatusConflict, Code: "busy"}, http.StatusConflict, "busy", false},
		{"wrapped", fmt.Errorf("cancel: %w", &face.Error{Status: http.StatusForbidden, Code: "forbidden"}), http.StatusForbidden, "forbidden", false},
		{"unexpected", errors.New("nats: timeout"), http.StatusServiceUnavailable, "unavailable", true},
	} {
		var logs bytes.Buffer
		f := testFace{Kit: face.NewKit(face.Mount{Logger: zerolog.New(&logs)}, facetest.New(), shape{})}
		h := face.Serve(f, func(w http.ResponseWriter, _ *http.Request) error {
			if c.err == nil {
				return face.WriteJSON(w, http.StatusTeapot, map[string]string{"ok": "yes"})
			}
			return c.err
		})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, get(t))
		require.Equal(t, c.status, rec.Code, c.name)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"), c.name)
		if c.code != "" {
			require.JSONEq(t, `{"shape_error":"`+c.code+`"}`, rec.Body.String(), c.name)
		}
		require.Equal(t, c.logged, strings.Contains(logs.String(), "nats: timeout"), "%s: %s", c.name, logs.String())
	}
	require.Equal(t, time.Second, face.Unavailable().RetryAfter, "an SDK retries a 503 after a second")
}

// The id shapes the faces mint are recognised, and nothing else is.
func TestIDShapes(t *testing.T) {
	b := face.IDBytes(context.Background(), face.GenAI, "sim", "k", 16)
	require.True(t, face.IsBase32ID(face.Base32.EncodeToString(b)))
	require.True(t, face.IsUUID(face.UUID(b)))
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, face.UUID(b))
	for _, s := range []string{"", "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyaa", "ABCDEFGHIJKLMNOPQRSTUVWXYA", "abcdefghijklmnopqrstuvwxy1"} {
		require.False(t, face.IsBase32ID(s), s)
	}
	for _, s := range []string{"", "0123abcd-0123-4567-89ab-0123456789aB", "0123abcd-0123-4567-89ab_0123456789ab", "0123abcd-0123-4567-89ab-0123456789a"} {
		require.False(t, face.IsUUID(s), s)
	}
}

// Only the genai face serves an output Pollux keeps no copy of through
// Pollux: its SDK's download sends x-goog-api-key, which a redirect would
// carry to the provider's origin; the others' SDKs send no key, or one
// every HTTP client drops across origins.
func TestProxied(t *testing.T) {
	t.Parallel()
	for _, k := range face.Kinds {
		require.Equal(t, k == face.GenAI, face.Proxied(k), k)
	}
}
