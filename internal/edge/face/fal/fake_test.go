package fal

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

const route = "sim"

// fakePollux is an in-memory face.Pollux: a submission becomes a pending
// record at once unless hold is set.
type fakePollux struct {
	mu        sync.Mutex
	jobs      map[string]*state.Job
	subs      []events.Submit
	cancels   []string
	submitErr error
	hold      bool
	changed   chan struct{}
	// waits receives the id of each Wait call.
	waits chan string
}

func newFake() *fakePollux {
	return &fakePollux{jobs: map[string]*state.Job{}, changed: make(chan struct{}), waits: make(chan string, 64)}
}

func (p *fakePollux) put(j *state.Job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs[j.ID] = j
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *fakePollux) Submit(_ context.Context, _ *http.Request, rt string, m events.Submit) error {
	p.mu.Lock()
	if p.submitErr != nil {
		defer p.mu.Unlock()
		return p.submitErr
	}
	p.subs = append(p.subs, m)
	_, exists := p.jobs[m.ID]
	p.mu.Unlock()
	if !p.hold && !exists {
		p.put(&state.Job{ID: m.ID, Route: rt, Model: m.Model, State: state.Pending, Metadata: m.Metadata, Input: m.Input})
	}
	return nil
}

func (p *fakePollux) Job(_ context.Context, id string) (*state.Job, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.jobs[id]
	if !ok {
		return nil, state.ErrNotFound
	}
	c := *j
	return &c, nil
}

func (p *fakePollux) Wait(ctx context.Context, id string, done func(*state.Job) bool) (*state.Job, error) {
	select {
	case p.waits <- id:
	default:
	}
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		j, err := p.Job(ctx, id)
		if err == nil && done(j) {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, err
		case <-changed:
		}
	}
}

func (p *fakePollux) Cancel(_ context.Context, _ *http.Request, j *state.Job, _ string) error {
	if j.State.Terminal() {
		return face.ErrTerminal
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancels = append(p.cancels, j.ID)
	return nil
}

func (p *fakePollux) Output(http.ResponseWriter, *http.Request, *state.Job, int) error {
	return face.ErrOutputNotFound
}

func (p *fakePollux) submissions() []events.Submit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]events.Submit(nil), p.subs...)
}

// frontdoorError stands for an error of the front door's, which
// face.AsError reads.
type frontdoorError struct{ e face.Error }

func (e *frontdoorError) Error() string { return e.e.Message }

func (e *frontdoorError) FaceError() face.Error { return e.e }

// setup is the fal face over a fake Pollux, waiting at most grace for
// a record.
func setup(t *testing.T) (*Face, *fakePollux) {
	t.Helper()
	p := newFake()
	f := New(face.Mount{Kind: face.Fal, Route: route, Prefix: face.Prefix(face.Fal, route)}, p).(*Face)
	f.grace = 50 * time.Millisecond
	return f, p
}

type reply struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

// call sends a request to the proxy with target as its x-fal-target-url.
func call(t *testing.T, f *Face, method, target, body string, hdr ...string) reply {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, "/", strings.NewReader(body))
	if target != "" {
		req.Header.Set(TargetHeader, target)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, req)
	r := reply{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"), "every answer is JSON: %s", r.raw)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r.body), r.raw)
	return r
}

const queue = "https://queue.fal.run/"

// submit submits input to endpoint and returns the request id.
func submit(t *testing.T, f *Face, endpoint, input string, hdr ...string) string {
	t.Helper()
	r := call(t, f, http.MethodPost, queue+endpoint, input, hdr...)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	return r.body["request_id"].(string)
}
