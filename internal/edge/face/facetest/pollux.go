package facetest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// ErrUnavailable is a Submit failure the front door does not explain, as
// when NATS is unavailable: a face answers it as its provider's 503.
var ErrUnavailable = errors.New("nats: no responders")

// Pollux is an in-memory face.Pollux. Its zero value is not usable: call
// New. It is safe for use by a face's handlers and the test at once.
type Pollux struct {
	mu      sync.Mutex
	jobs    map[string]*state.Job
	subs    []events.Submit
	cancels []string
	// changed is closed, and replaced, on every change of a record.
	changed chan struct{}
	// waits receives the id of each Wait call (dropped when full).
	waits chan string

	hold      bool
	submitErr error
	// lastRead, during an outage, are the records as they stood when it
	// began: what the front door last read of each.
	lastRead   map[string]*state.Job
	cancelEnds bool
	keeps      map[string]bool
	now        func() time.Time
	inputs     *inputs.Store
	webhooks   *face.Webhooks
}

var _ face.Pollux = (*Pollux)(nil)

// New returns a Pollux with no records, whose clock is time.Now.
func New() *Pollux {
	return &Pollux{jobs: map[string]*state.Job{}, changed: make(chan struct{}), waits: make(chan string, 64), now: time.Now}
}

// KeepFiles keeps the callers' input files in store (Files): each
// caller is its Authorization header.
func (p *Pollux) KeepFiles(store *inputs.Store) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inputs = store
}

// Files are the caller's input files, when KeepFiles gave a store.
func (p *Pollux) Files(r *http.Request) (*face.Files, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inputs == nil {
		return face.NoFiles()
	}
	return &face.Files{Store: p.inputs, Owner: r.Header.Get("Authorization")}, nil
}

// Hold keeps, when on, a submission's record from being made: the
// submission is durable but ingest has not taken it (yet).
func (p *Pollux) Hold(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = on
}

// FailSubmit makes Submit return err (nil: succeed again).
func (p *Pollux) FailSubmit(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.submitErr = err
}

// Outage makes, when on, every method that reads or writes records
// answer as the front door does while NATS is unavailable: a 503
// *face.Error; Job's wraps a *face.Outage whose Last is the job's record
// as it stood when the outage began (nil for a job that had none), as
// the front door answers from the last record it read. Records changed
// meanwhile (Put, Update) are not seen until it is off.
func (p *Pollux) Outage(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastRead = nil
	if on {
		p.lastRead = map[string]*state.Job{}
		for id, j := range p.jobs {
			p.lastRead[id] = clone(j)
		}
	}
}

// unavailable is the front door's answer while NATS is unavailable,
// carrying what it last read of job id ("": none asked about).
func (p *Pollux) unavailable(id string) error {
	o := &face.Outage{Err: ErrUnavailable}
	if j, ok := p.lastRead[id]; ok && id != "" {
		o.Last = clone(j)
	}
	return &face.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: time.Second,
		Message: "Pollux cannot read job records now; retry later", Err: o}
}

// KeepOutputs makes routes keep their outputs (KeepsOutputs).
func (p *Pollux) KeepOutputs(routes ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keeps == nil {
		p.keeps = map[string]bool{}
	}
	for _, r := range routes {
		p.keeps[r] = true
	}
}

// KeepsOutputs reports whether route is one KeepOutputs named.
func (p *Pollux) KeepsOutputs(route string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keeps[route]
}

// CancelEnds makes, when on, a cancel end its job at once (canceled).
func (p *Pollux) CancelEnds(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancelEnds = on
}

// Clock sets the clock that stamps the records Submit and a cancel make.
func (p *Pollux) Clock(now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}

// Submit checks m as the front door does (a contract violation, or no
// ID, is a *face.Error, 400 naming the field, that wraps the
// *events.FieldError), then, unless failing, records
// m and, unless held, makes its pending record (once: a submission of an
// id that has a record changes nothing). A refused or failed submission
// is not recorded.
func (p *Pollux) Submit(_ context.Context, _ *http.Request, route string, m events.Submit) error {
	if err := check(m); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastRead != nil {
		return p.unavailable("")
	}
	if p.submitErr != nil {
		return p.submitErr
	}
	p.subs = append(p.subs, m)
	if _, ok := p.jobs[m.ID]; ok || p.hold {
		return nil
	}
	p.putLocked(&state.Job{ID: m.ID, Route: route, Model: m.Model, State: state.Pending, Input: m.Input,
		Metadata: m.Metadata, IdempotencyKey: m.IdempotencyKey, CreatedAt: p.now().UTC()})
	return nil
}

// Job returns a copy of job id's record (sharing nothing with it, as a
// record read from the bucket); state.ErrNotFound when there is none.
func (p *Pollux) Job(_ context.Context, id string) (*state.Job, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastRead != nil {
		return nil, p.unavailable(id)
	}
	j, ok := p.jobs[id]
	if !ok {
		return nil, state.ErrNotFound
	}
	return clone(j), nil
}

// Wait returns job id's record once done holds for it, woken by every
// change; when ctx ends first, the latest record (state.ErrNotFound when
// there is none). Each call is announced on Waits.
func (p *Pollux) Wait(ctx context.Context, id string, done func(*state.Job) bool) (*state.Job, error) {
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

// Cancel records a cancel of job j (ending it when CancelEnds is on);
// face.ErrTerminal when j has ended, or its record has since (as the
// front door's cancel finds it ended meanwhile): nothing is recorded then.
func (p *Pollux) Cancel(_ context.Context, _ *http.Request, j *state.Job, _ string) error {
	if j.State.Terminal() {
		return face.ErrTerminal
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastRead != nil {
		return p.unavailable("")
	}
	c, ok := p.jobs[j.ID]
	if ok && c.State.Terminal() {
		return face.ErrTerminal
	}
	p.cancels = append(p.cancels, j.ID)
	if ok && p.cancelEnds {
		ended := clone(c)
		ended.State, ended.CompletedAt = state.Canceled, p.now().UTC()
		p.putLocked(ended)
	}
	return nil
}

// Output writes output n as the front door does: an output custody saved
// (face.Saved) is served, its body "kept " and its object's name; any
// other, when proxy, is served with the body "proxied " and its
// provider's URL (face.ProviderURL), else is a redirect to that URL;
// face.ErrOutputNotFound when the job has no such output.
func (p *Pollux) Output(w http.ResponseWriter, r *http.Request, j *state.Job, n int, proxy bool) error {
	if faceshape.Saved(j, n) {
		o := j.Custody.Outputs[n]
		w.Header().Set("Content-Type", o.ContentType)
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "kept "+o.Object)
		return nil
	}
	u, err := face.ProviderURL(j, n)
	if err != nil {
		return err
	}
	if proxy {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "proxied "+u)
		return nil
	}
	http.Redirect(w, r, u, http.StatusFound)
	return nil
}

// List returns the records face k made on route (metadata "face" names
// k; the job is on route or came through it), newest first by CreatedAt
// then id, after job after; face.ErrNoSuchJob when after is not one of
// them.
func (p *Pollux) List(_ context.Context, k face.Kind, route, after string, limit int) ([]*state.Job, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastRead != nil {
		return nil, false, p.unavailable("")
	}
	var all []*state.Job
	for _, j := range p.jobs {
		if j.Metadata["face"] == string(k) && (j.Route == route || j.Routing != nil && j.Routing.Via == route) {
			all = append(all, clone(j))
		}
	}
	slices.SortFunc(all, func(a, b *state.Job) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if after != "" {
		i := slices.IndexFunc(all, func(j *state.Job) bool { return j.ID == after })
		if i < 0 {
			return nil, false, face.ErrNoSuchJob
		}
		all = all[i+1:]
	}
	limit = max(1, min(limit, face.MaxList))
	if len(all) > limit {
		return all[:limit], true, nil
	}
	return all, false, nil
}

// Put stores a copy of j as its record and wakes the waiters.
func (p *Pollux) Put(j *state.Job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.putLocked(j)
}

// Update changes job id's record (which must exist) and wakes the
// waiters.
func (p *Pollux) Update(id string, change func(*state.Job)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := clone(p.jobs[id])
	change(c)
	p.putLocked(c)
}

func (p *Pollux) putLocked(j *state.Job) {
	p.jobs[j.ID] = clone(j)
	close(p.changed)
	p.changed = make(chan struct{})
}

// clone copies j through JSON, as the jobs bucket stores it, so the copy
// shares no slice, map or pointer with j. A record that does not encode
// is a broken test.
func clone(j *state.Job) *state.Job {
	b, err := json.Marshal(j)
	if err != nil {
		panic("facetest: a record that does not encode: " + err.Error())
	}
	var c state.Job
	if err := json.Unmarshal(b, &c); err != nil {
		panic("facetest: a record that does not decode: " + err.Error())
	}
	return &c
}

// check refuses a submission the front door would: one without an ID
// (a face sets it) or one events.DecodeSubmit refuses, as the front door
// answers it (a 400: invalid_field, or invalid_body when no field is at
// fault).
func check(m events.Submit) error {
	if m.ID == "" {
		return invalidSubmit(&events.FieldError{Field: "id", Problem: "required: a face sets the job id"})
	}
	b, err := json.Marshal(m)
	if err == nil {
		_, err = events.DecodeSubmit(b)
	}
	var fe *events.FieldError
	if err != nil && !errors.As(err, &fe) {
		fe = &events.FieldError{Problem: err.Error()}
	}
	if fe != nil {
		return invalidSubmit(fe)
	}
	return nil
}

func invalidSubmit(fe *events.FieldError) *face.Error {
	code := "invalid_field"
	if fe.Field == "" {
		code = "invalid_body"
	}
	return &face.Error{Status: http.StatusBadRequest, Code: code, Field: fe.Field, Message: fe.Error(), Err: fe}
}

// Submissions returns the submissions Submit took, in order.
func (p *Pollux) Submissions() []events.Submit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]events.Submit(nil), p.subs...)
}

// Cancels returns the ids of the jobs Cancel was asked for, in order.
func (p *Pollux) Cancels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.cancels...)
}

// Waits receives the id of each Wait call, so a test knows a face is
// waiting before it changes a record.
func (p *Pollux) Waits() <-chan string { return p.waits }

// SetWebhooks sets what Webhooks answers (nil: this Pollux calls no
// webhooks of apps' own).
func (p *Pollux) SetWebhooks(w *face.Webhooks) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.webhooks = w
}

// Webhooks answers what SetWebhooks set (face.Pollux).
func (p *Pollux) Webhooks(*http.Request) *face.Webhooks {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.webhooks
}
