package face

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Shape is what a Kit needs of the face it serves: the face's answer
// about a job it may not see, and the shape of the ids it makes.
type Shape interface {
	// NotFound is the face's answer about job id when it may not see it:
	// an unknown id, another route's job and one the face did not make
	// are answered alike.
	NotFound(id string) *Error
	// Mints reports whether id has the shape of the ids the face makes:
	// any other is not looked up.
	Mints(id string) bool
}

// Kit is what every face is built on: a face embeds one (NewKit) and asks
// Pollux only through it, so what the faces share is written once — the
// job lookup that decides what a face may see, the waits for a record,
// the cancel, the list, the face's own URL — and a face is its routes and
// its mapping to and from its provider's shape.
type Kit struct {
	mount   Mount
	pollux  Pollux
	shape   Shape
	pending pending
}

// NewKit is the kit of a face of shape s, mounted as m, over Pollux p.
func NewKit(m Mount, p Pollux, s Shape) *Kit {
	return &Kit{mount: m, pollux: p, shape: s}
}

// Mount is the mount the face serves.
func (k *Kit) Mount() Mount { return k.mount }

// Logger is the face's logger.
func (k *Kit) Logger() *zerolog.Logger { return &k.mount.Logger }

// SubmittedTo is the route job j was submitted to: the model route it
// came through (Routing.Via), else its route.
func SubmittedTo(j *state.Job) string {
	if j.Routing != nil && j.Routing.Via != "" {
		return j.Routing.Via
	}
	return j.Route
}

// sees reports whether the face may see job j for the caller whose
// context ctx is: one it made (its metadata names the face, its id is of
// the face's shape) on the face's route — a model route's face sees the
// jobs submitted through the model route, whichever member runs them —
// of an app the caller sees (tenant.Viewer.Sees: the front door's token).
func (k *Kit) sees(ctx context.Context, j *state.Job) bool {
	return j != nil && j.Metadata[MetaFace] == string(k.mount.Kind) && SubmittedTo(j) == k.mount.Route && k.shape.Mints(j.ID) &&
		tenant.From(ctx).Sees(j)
}

// notFound is the face's answer about job id it may not see, carrying
// state.ErrNotFound for errors.Is.
func (k *Kit) notFound(id string) *Error {
	e := k.shape.NotFound(id)
	e.Err = state.ErrNotFound
	return e
}

// Job is job id's record as request r may see it, and the one place that
// decides whether a face may: a job of another route, one the face did
// not make, another app's, and an unknown id are all the face's NotFound (which wraps
// state.ErrNotFound), whatever the verb. A create this process answered
// before its record existed (Created) is answered from the create; a
// record that does not exist yet is waited for (the mount's RecordGrace),
// since a create answered by another gateway a moment ago may be on its
// way. While records cannot be read (an Outage), a job whose last record
// read had ended is answered from it — an ended job never changes — and
// any other is the 503 Pollux answered (Poll answers more).
func (k *Kit) Job(r *http.Request, id string) (*state.Job, error) {
	if !k.shape.Mints(id) {
		return nil, k.notFound(id)
	}
	ctx := r.Context()
	j, err := k.pollux.Job(ctx, id)
	if o := outage(err); o != nil && o.Last != nil && o.Last.State.Terminal() {
		j, err = o.Last, nil
	}
	if errors.Is(err, state.ErrNotFound) {
		if p := k.pending.get(id, k.mount.Clock()); p != nil {
			j, err = p, nil
		} else {
			j, err = k.awaitRecord(ctx, id)
		}
	}
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil, k.notFound(id)
	case err != nil:
		return nil, err
	case !k.sees(ctx, j):
		return nil, k.notFound(id)
	}
	return j, nil
}

// Poll is Job for a request that asks how a job stands — a get, a
// status — which an app makes over and over until the job ends. While
// records cannot be read (an Outage: NATS restarting, failing over, out
// of reach), a job this process knows is answered as it last knew it
// rather than with a 503 the app's SDK would give up on after its few
// retries: the record it last read (freshened by the jobs index, see
// Pollux.Job), or a create it answered before the record existed. A job
// not ended is answered not ended — what may be stale never says it
// ended — and its next check at least OutagePollAfter away, the poll hint
// a face derives from it (PollAfter). An id this process knows nothing of
// is still the 503.
func (k *Kit) Poll(r *http.Request, id string) (*state.Job, error) {
	j, err := k.Job(r.WithContext(context.WithValue(r.Context(), pollKey{}, true)), id)
	o := outage(err)
	if o == nil {
		return j, err
	}
	now := k.mount.Clock()
	last := o.Last
	if last == nil {
		last = k.pending.get(id, now)
	}
	if last == nil || !k.sees(r.Context(), last) || last.State.Terminal() {
		return nil, err
	}
	c := *last // its maps and slices are shared, not changed
	c.NextCheckAt = maxTime(c.NextCheckAt, now.Add(OutagePollAfter))
	return &c, nil
}

// pollKey marks the context of a read Poll makes.
type pollKey struct{}

// Polling reports whether ctx is a read Poll makes: one that the record
// read before answers through an outage as well as a record read now, so
// a Pollux whose connection is down answers it at once (an Outage)
// rather than wait for NATS to come back, as it may for another verb.
func Polling(ctx context.Context) bool { return ctx.Value(pollKey{}) != nil }

// outage is the Outage err carries, if any.
func outage(err error) *Outage {
	var o *Outage
	if errors.As(err, &o) {
		return o
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// awaitRecord waits up to the mount's RecordGrace for job id's record.
func (k *Kit) awaitRecord(ctx context.Context, id string) (*state.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(k.mount.RecordGrace, DefaultRecordGrace))
	defer cancel()
	return k.pollux.Wait(ctx, id, func(*state.Job) bool { return true })
}

// Submit publishes submission m on the face's route as request r's
// caller (Pollux.Submit).
func (k *Kit) Submit(r *http.Request, m events.Submit) error {
	return k.pollux.Submit(r.Context(), r, k.mount.Route, m)
}

// Created is the record of submission m, which the face has just made
// durable, once it exists — waiting for it until until. When it does not
// exist by then (ingest takes it later), it is m as a pending job, which
// Job answers in this process until the record exists (PendingTTL), so
// the app's next request does not meet a 404.
func (k *Kit) Created(ctx context.Context, m events.Submit, until time.Time) (*state.Job, error) {
	wctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	j, err := k.pollux.Wait(wctx, m.ID, func(*state.Job) bool { return true })
	switch {
	case errors.Is(err, state.ErrNotFound):
		k.mount.Logger.Warn().Str(logkey.JobID, m.ID).Msg("a create's job has no record yet; answering it from the create")
		now := k.mount.Clock()
		j = &state.Job{ID: m.ID, Route: k.mount.Route, Model: m.Model, State: state.Pending, CreatedAt: now.UTC(),
			Metadata: m.Metadata, Input: m.Input, IdempotencyKey: m.IdempotencyKey,
			// The app the front door gave the submission: the caller's.
			App: tenant.From(ctx).App}
		k.pending.add(j, now)
		return j, nil
	case err != nil:
		return nil, err
	case !k.sees(ctx, j):
		return nil, k.notFound(m.ID)
	}
	return j, nil
}

// Ended is job j once it has ended, or as it stands at until: j itself
// when it has ended already or has no record yet.
func (k *Kit) Ended(ctx context.Context, j *state.Job, until time.Time) *state.Job {
	if j.State.Terminal() || k.pending.has(j) {
		return j
	}
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	if last, err := k.pollux.Wait(ctx, j.ID, func(j *state.Job) bool { return j.State.Terminal() }); err == nil && k.sees(ctx, last) {
		return last
	}
	return j
}

// Await is job id's record once done holds for it, read through the
// jobs index (Pollux.Wait: no provider call), waiting until until; nil
// when it did not hold by then, or the face may not see the record.
func (k *Kit) Await(r *http.Request, id string, until time.Time, done func(*state.Job) bool) *state.Job {
	ctx, cancel := context.WithDeadline(r.Context(), until)
	defer cancel()
	j, err := k.pollux.Wait(ctx, id, done)
	if err != nil || j == nil || !k.sees(ctx, j) || !done(j) {
		return nil
	}
	return j
}

// Cancel asks for job j's cancel (a job Job returned) on request r's
// behalf: ErrTerminal when it has ended, a 409 with Retry-After when it
// has no record yet (nothing to cancel until ingest takes it).
func (k *Kit) Cancel(r *http.Request, j *state.Job, reason string) error {
	if k.pending.has(j) {
		return &Error{Status: http.StatusConflict, Code: "not_taken_yet", RetryAfter: time.Second,
			Message: "job " + j.ID + " is not taken yet; retry in a few seconds"}
	}
	return k.pollux.Cancel(r.Context(), r, j, reason)
}

// List is the page of the jobs the face made on its route, newest first,
// after job after (Pollux.List), each one the face may see.
func (k *Kit) List(r *http.Request, after string, limit int) ([]*state.Job, bool, error) {
	jobs, more, err := k.pollux.List(r.Context(), k.mount.Kind, k.mount.Route, after, limit)
	if err != nil {
		return nil, false, err
	}
	seen := jobs[:0]
	for _, j := range jobs {
		if k.sees(r.Context(), j) {
			seen = append(seen, j)
		}
	}
	return seen, more, nil
}

// Output writes output n of job j (a job Job returned): the bytes output
// custody kept, else the provider's bytes through Pollux when the face's
// SDK downloads with the app's key (Proxied), else a redirect to the
// provider's URL (Pollux.Output).
func (k *Kit) Output(w http.ResponseWriter, r *http.Request, j *state.Job, n int) error {
	return k.pollux.Output(w, r, j, n, Proxied(k.mount.Kind))
}

// Base is the face's absolute URL as request r reached it: scheme, host
// and the mount's prefix.
func (k *Kit) Base(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host + k.mount.Prefix
}

// Webhooks is how this Pollux calls request r's caller's own webhook URLs
// (Pollux.Webhooks): nil when it calls none.
func (k *Kit) Webhooks(r *http.Request) *Webhooks { return k.pollux.Webhooks(r) }
