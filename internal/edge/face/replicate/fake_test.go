package replicate_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/replicate"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

const route = "sim"

// fakePollux is an in-memory face.Pollux: submissions make records at
// once unless held, and every change wakes the waiters.
type fakePollux struct {
	mu      sync.Mutex
	jobs    map[string]*state.Job
	subs    []events.Submit
	cancels []string
	changed chan struct{}
	// hold keeps a submission's record from being made (ingest slow).
	hold bool
	// failSubmit makes Submit fail (NATS unavailable).
	failSubmit bool
	// cancelEnds makes a cancel end the job at once.
	cancelEnds bool
}

func newFake() *fakePollux {
	return &fakePollux{jobs: map[string]*state.Job{}, changed: make(chan struct{})}
}

func (p *fakePollux) Submit(_ context.Context, _ *http.Request, rt string, m events.Submit) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failSubmit {
		return errors.New("nats: no responders")
	}
	p.subs = append(p.subs, m)
	if _, ok := p.jobs[m.ID]; ok || p.hold {
		return nil
	}
	p.putLocked(&state.Job{ID: m.ID, Route: rt, Model: m.Model, State: state.Pending, Input: m.Input, KeepInput: true,
		Metadata: m.Metadata, IdempotencyKey: m.IdempotencyKey, CreatedAt: time.Now().UTC()})
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
	for {
		p.mu.Lock()
		j, ok := p.jobs[id]
		ch := p.changed
		var c *state.Job
		if ok {
			cp := *j
			c = &cp
		}
		p.mu.Unlock()
		if c != nil && done(c) {
			return c, nil
		}
		select {
		case <-ctx.Done():
			if c == nil {
				return nil, state.ErrNotFound
			}
			return c, nil
		case <-ch:
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
	if p.cancelEnds {
		c := *p.jobs[j.ID]
		c.State, c.CompletedAt = state.Canceled, time.Now().UTC()
		p.putLocked(&c)
	}
	return nil
}

func (p *fakePollux) Output(http.ResponseWriter, *http.Request, *state.Job, int) error {
	return face.ErrOutputNotFound
}

// put stores j and wakes the waiters.
func (p *fakePollux) put(j *state.Job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.putLocked(j)
}

func (p *fakePollux) putLocked(j *state.Job) {
	c := *j
	p.jobs[j.ID] = &c
	close(p.changed)
	p.changed = make(chan struct{})
}

// update changes job id's record.
func (p *fakePollux) update(id string, change func(*state.Job)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := *p.jobs[id]
	change(&c)
	p.putLocked(&c)
}

func (p *fakePollux) submissions() []events.Submit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]events.Submit(nil), p.subs...)
}

// setup serves the face of route over a fake Pollux.
func setup(t *testing.T) (*fakePollux, *httptest.Server) {
	t.Helper()
	return setupWith(t, replicate.New)
}

func setupWith(t *testing.T, build face.New) (*fakePollux, *httptest.Server) {
	t.Helper()
	p := newFake()
	m := face.Mount{Kind: face.Replicate, Route: route, Prefix: face.Prefix(face.Replicate, route), Logger: zerolog.Nop()}
	f := build(m, p)
	srv := httptest.NewServer(http.StripPrefix(m.Prefix, f.Handler()))
	t.Cleanup(srv.Close)
	return p, srv
}

// answer is a response's status and headers.
type answer struct {
	StatusCode int
	Header     http.Header
}

// do sends a request to the face and returns the response and its body.
func do(t *testing.T, srv *httptest.Server, method, path, body string, h map[string]string) (*answer, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/replicate/"+route+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &answer{StatusCode: resp.StatusCode, Header: resp.Header}, string(b)
}
