package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The decisions ingest makes, as pure functions of what it knows: the
// service only carries them out. Each has its table test.

// step is what a submission needs next, given its job's record.
type step int

const (
	// stepSubmit: no call has been made, or the last one was answered
	// without creating the job: call (again).
	stepSubmit step = iota
	// stepDuplicate: another intake message owns the job; this one is a
	// duplicate and ends.
	stepDuplicate
	// stepReject: the id is taken on another route.
	stepReject
	// stepResume: the provider has the job; make sure its events are out
	// and its check armed (a redelivery after a crash).
	stepResume
	// stepFinished: the job is terminal; nothing more (its events are
	// made sure of, as for stepResume).
	stepFinished
	// stepCancel: a cancel came before the job was submitted.
	stepCancel
	// stepInDoubt: a call was interrupted and its outcome is unknown.
	stepInDoubt
)

// nextStep decides what the submission carried by intake message seq on
// route needs, given its job's record.
func nextStep(j *state.Job, route string, seq uint64) step {
	switch {
	case j.Route != route:
		return stepReject
	case j.IntakeSeq != seq:
		return stepDuplicate
	case j.State.Terminal():
		return stepFinished
	case j.RemoteID != "":
		return stepResume
	case !j.CancelRequestedAt.IsZero():
		return stepCancel
	case j.SubmitInDoubt:
		return stepInDoubt
	}
	return stepSubmit
}

// outcome is what a failed submit call means.
type outcome int

const (
	// outRefused: the provider refused the submission; the job fails with
	// its reason.
	outRefused outcome = iota
	// outPaused: a rate limit or refused credentials; the route is paused,
	// nothing was created, the submission waits.
	outPaused
	// outAnswered: another failure the provider answered (a 5xx with a
	// body, a Retry-After), or a call that never left: nothing was
	// created; retry with backoff.
	outAnswered
	// outInDoubt: no answer (a timeout, a dropped connection): the
	// provider may have created the job.
	outInDoubt
)

// failed classifies a failed submit call.
func failed(err error) outcome {
	switch provider.ClassOf(err) {
	case provider.Invalid:
		return outRefused
	case provider.RateLimited, provider.Auth:
		return outPaused
	case provider.NotFound:
		return outAnswered // a create cannot be "unknown job"; the provider answered
	}
	if neverSent(err) || provider.RetryAfterOf(err) > 0 || httpStatus(err) != 0 {
		return outAnswered
	}
	return outInDoubt
}

// neverSent reports whether a failed call cannot have reached the provider.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func httpStatus(err error) int {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.HTTPStatus
	}
	return 0
}

// resolution is how a submission in doubt is resolved.
type resolution int

const (
	// resolveWait: too soon; the interrupted call may still be creating
	// the job at the provider.
	resolveWait resolution = iota
	// resolveFind: look the job up at the provider by what Pollux sent.
	resolveFind
	// resolveRetry: submit again; the provider deduplicates by the
	// idempotency key.
	resolveRetry
	// resolveLost: nothing can tell, and a second create may duplicate
	// the job: it is lost.
	resolveLost
)

// doubtMargin is how long after an interrupted call's timeout a lookup is
// trusted to see the job the call may have created: as long again as the
// timeout, at most this.
const doubtMargin = 10 * time.Second

// reconnectGrace is how long after NATS comes back a doubt about an
// attempt made before it waits: the attempt's process may hold the
// provider's answer and be retrying its write, which lands within this
// once NATS answers (its retries back off to 5 s, and a write waits for
// its request's timeout).
const reconnectGrace = 15 * time.Second

// resolve decides what to do with a submission whose last call's outcome
// is unknown. Not before the call is surely over: until then the call may
// still be creating the job, or its process recording it — nor, for an
// attempt made before this process's NATS connection was last
// re-established (reconnected), before reconnectGrace has passed since:
// NATS was away, and the attempt's process may be landing the answer it
// held meanwhile. Then a provider that can find the job decides; one that
// deduplicates is simply asked again; otherwise the job is lost rather
// than risk a second create.
func resolve(j *state.Job, info provider.Info, canFind bool, callTimeout time.Duration, now, reconnected time.Time) (resolution, time.Time) {
	at := j.AttemptedAt.Add(callTimeout + min(callTimeout, doubtMargin))
	if j.AttemptedAt.Before(reconnected) {
		at = later(at, reconnected.Add(reconnectGrace))
	}
	if now.Before(at) {
		return resolveWait, at
	}
	switch {
	case canFind:
		return resolveFind, time.Time{}
	case info.Idempotent:
		return resolveRetry, time.Time{}
	}
	return resolveLost, time.Time{}
}

// lostReason is the reason of a job lost in doubt at a provider that
// cannot be asked for it.
func lostReason(r *route.Route, j *state.Job) string {
	return "the outcome of an interrupted submit call is unknown, and route " + r.Name +
		"'s provider cannot be asked for the job (it shows back nothing Pollux sent that names it) nor deduplicates a retry, so Pollux did not resubmit; look for idempotency key " +
		j.IdempotencyKey + " at the provider"
}

// cannotTellReason is the reason of a job lost in doubt when its provider
// was asked and its answer could not tell (provider.ErrCannotTell).
func cannotTellReason(r *route.Route, j *state.Job, err error) string {
	return "the outcome of an interrupted submit call is unknown, and route " + r.Name +
		"'s provider was asked for the job but could not tell (" + err.Error() + "), so Pollux did not resubmit; look for idempotency key " +
		j.IdempotencyKey + " at the provider"
}

// cancelStep is what a cancel request leads to, given its job's record.
type cancelStep int

const (
	// cancelCall: ask the provider to cancel.
	cancelCall cancelStep = iota
	// cancelFinished: the job is terminal; nothing to cancel.
	cancelFinished
	// cancelUnsubmitted: the job has no remote id yet; its submission sees
	// the request and cancels instead of submitting.
	cancelUnsubmitted
	// cancelUnsupported: the route's provider cannot cancel.
	cancelUnsupported
)

// cancelNext decides what a cancel request for job j leads to.
func cancelNext(j *state.Job, canCancel bool) cancelStep {
	switch {
	case j.State.Terminal():
		return cancelFinished
	case j.RemoteID == "":
		return cancelUnsubmitted
	case !canCancel:
		return cancelUnsupported
	}
	return cancelCall
}

// jobID is the id of a submission: the one it gives, else the one derived
// from its idempotency key, else the one derived from the intake message.
func jobID(route string, m *events.Submit, seq uint64, stored time.Time) string {
	switch {
	case m.ID != "":
		return m.ID
	case m.IdempotencyKey != "":
		return events.AppKeyID(route, m.App, m.IdempotencyKey)
	}
	return events.MessageID(seq, stored)
}

// rejectionID finds the job id of an intake message that failed
// validation, so that its rejection lands where the client looks: the id
// it gave, else the one its idempotency key (or, for a track request, its
// remote id) gives on the route — whatever the key's length, as clients
// derive it (events.KeyID) — else the one the stored message gives a
// submission or track request (events.MessageID of seq and stored), else,
// for a cancel, which names its job by id only, "_". Every rejection of
// an intake message, by the route's ingest or by the sweep of unserved
// routes, takes its id from here.
func rejectionID(kind, route string, data []byte, seq uint64, stored time.Time) string {
	fallback := events.MessageID(seq, stored)
	if kind == events.KindCancel {
		fallback = "_"
	}
	var m struct {
		ID             string `json:"id"`
		IdempotencyKey string `json:"idempotency_key"`
		RemoteID       string `json:"remote_id"`
		App            string `json:"app"`
	}
	if json.Unmarshal(data, &m) != nil {
		return fallback
	}
	switch {
	case events.ValidToken(m.ID):
		return m.ID
	case !events.ValidToken(route):
	case kind == events.KindSubmit && m.IdempotencyKey != "":
		return events.AppKeyID(route, m.App, m.IdempotencyKey)
	case kind == events.KindTrack && m.RemoteID != "":
		return events.AppRemoteKeyID(route, m.App, m.RemoteID)
	}
	return fallback
}

// deadline resolves a request's deadline against the route accepted at
// now: its own (absolute or relative), else the route's default; a
// deadline in the past or beyond the route's max_deadline is refused.
func deadline(r *route.Route, at time.Time, timeoutS float64, now time.Time) (time.Time, error) {
	d := events.ResolveDeadline(at, timeoutS, now)
	switch {
	case d.IsZero():
		return now.Add(r.Deadline).UTC(), nil
	case !d.After(now):
		return time.Time{}, &events.FieldError{Field: "deadline", Problem: fmt.Sprintf("%s is in the past", d.Format(time.RFC3339))}
	case d.Sub(now) > r.MaxDeadline:
		return time.Time{}, &events.FieldError{Field: "deadline", Problem: fmt.Sprintf("more than route %s's max_deadline (%s) away", r.Name, r.MaxDeadline)}
	}
	return d, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
