package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The intake verbs (the Intake view): what ingest hands the owner while it
// takes a job from a submission to the provider's answer. Accept stores
// the job; Hold parks an unsubmitted one; Attempt marks a submit call,
// Submitted records the provider's acceptance (and arms the check),
// IndexRemote files the remote id for webhooks; Refused, Requeue and End
// record the other answers (End's Guard withdraws only a job never
// submitted, or gives up only on one still in doubt); RequestCancelBy
// and Canceled carry a cancel; Resume re-follows a redelivered
// submission; Reject answers an intake message that is no job.

// Accept stores a new job and reports whether it created it. When the id
// is taken it returns the existing record instead, for the caller to
// decide what the duplicate means. The write is retried until it lands or
// ctx ends: a job carrying a submit attempt (AttemptID) is about to be
// submitted, and a create whose answer was lost is then known by its
// attempt id, not taken for a duplicate. A job accepted with a remote id
// (a tracked job) is armed and its events published, as Resume does. With
// tracing on, a job without a trace context takes ctx's span's: the job's
// trace (see package tracing).
func (in Intake) Accept(ctx context.Context, j *state.Job) (Record, bool, error) {
	o := in.o
	log := o.log.With().Str(logkey.JobID, j.ID).Str(logkey.Route, j.Route).Logger()
	if o.tracer != nil {
		o.traceJob(ctx, j)
	}
	waiting := j.RemoteID == "" && j.WaitingFor != "" && j.EventSeq == 0
	if waiting {
		j.Record(events.EventWaiting, o.now().UTC()) // stored to wait: seen, and cancelable, meanwhile
	}
	var r Record
	created := false
	err := o.keepRetrying(ctx, log, "creating the job", func(ctx context.Context) error {
		var err error
		r, err = o.store.create(ctx, j)
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, state.ErrExists) {
			return err
		}
		if r, err = o.store.get(ctx, j.ID); err != nil {
			return err
		}
		// An earlier try of this very create that landed.
		created = j.AttemptID != "" && r.AttemptID == j.AttemptID
		return nil
	})
	if err == nil && r.ResubmitOf != "" {
		o.linkResubmission(ctx, r.Job, log)
	}
	if err != nil || !created {
		return r, false, err
	}
	if r.RemoteID == "" {
		if waiting {
			if _, err := o.publish(ctx, r.Job); err != nil {
				// In the record: the job's next write publishes it.
				log.Warn().Err(err).Msg("publishing the waiting job's event failed; its next write publishes it")
			}
		}
		return r, true, nil
	}
	// Just created: nobody published its events yet.
	published, err := o.publish(ctx, r.Job)
	if err != nil {
		return r, true, err
	}
	return r, true, o.arm(ctx, r.Job, cmp.Or(r.NextCheckAt, o.now()), published)
}

// Resume makes sure a submitted job is followed: the events its writers
// recorded are out, and, unless it is terminal, it has its check (due at
// the record's next check time). It is what a redelivered submission or a
// repeated track request does; a job that has both changes nothing.
func (in Intake) Resume(ctx context.Context, r Record) error {
	o := in.o
	if err := o.republish(ctx, r.Job); err != nil {
		return err
	}
	if r.State.Terminal() || r.RemoteID == "" {
		return nil
	}
	return o.arm(ctx, r.Job, cmp.Or(r.NextCheckAt, o.now()), r.EventSeq)
}

// Attempt marks the start of another submit call on the job, attempt id
// its random id, so that a process that dies during the call leaves the
// attempt in doubt (see state.Job.SubmitInDoubt), and records the running
// slots the call holds (slots: every scope the job holds a slot in). It
// writes nothing for a job that is submitted or terminal — nor, when
// exclusive, for one whose submission is in doubt (another process's
// attempt under way: the caller finds it is not its own) — and returns the
// record either way. Nor does it for a job with a cancel request: a
// cancel recorded before the attempt wins, and the job is never created.
// The mark is retried until it lands or ctx ends; a try
// whose answer was lost is known by the attempt id.
func (in Intake) Attempt(ctx context.Context, r Record, attempt string, slots []state.Slot, exclusive bool) (Record, error) {
	o := in.o
	now := o.now().UTC()
	log := o.log.With().Str(logkey.JobID, r.ID).Str(logkey.Route, r.Route).Logger()
	id, from := r.ID, r
	err := o.keepRetrying(ctx, log, "recording the submit attempt", func(ctx context.Context) error {
		next, err := o.store.mutate(ctx, id, from, func(cur *state.Job) error {
			if cur.RemoteID != "" || cur.State.Terminal() || cur.AttemptID == attempt || exclusive && cur.SubmitInDoubt ||
				!cur.CancelRequestedAt.IsZero() {
				return errNoWrite
			}
			cur.SubmitAttempts++
			if cur.SubmitInDoubt {
				cur.SubmitFailures++ // the attempt it follows got no answer
			}
			cur.SubmitInDoubt = true
			cur.AttemptedAt = now
			cur.AttemptID = attempt
			cur.WaitingFor = ""
			for _, sl := range slots {
				if !cur.HoldsSlot(sl.Scope) {
					cur.Slots = append(cur.Slots, sl)
				}
			}
			return nil
		})
		if errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("%w: %w", errPermanent, err)
		}
		if err != nil {
			from = Record{} // read afresh next time: the write may have landed
			return err
		}
		r = next
		return nil
	})
	return r, err
}

// Created is a provider's acceptance of a submit call.
type Created struct {
	// RemoteID is the provider's id for the job; Ref what its adapter
	// keeps to reach it again.
	RemoteID string
	Ref      json.RawMessage
	// Obs is the status the create answered with.
	Obs state.Observation
	// Due is when the job's first poll is due.
	Due time.Time
}

// Submitted records a provider's acceptance of a submit call. The
// provider has the job now, so this result is never thrown away: the
// write is retried, however long NATS is away, until it lands or ctx ends
// (a graceful stop gives a handler its drain time). Then the job's events
// are published and its check armed, retried the same way. The returned
// record says whether a cancel was asked for meanwhile.
func (in Intake) Submitted(ctx context.Context, r Record, c Created) (Record, error) {
	o := in.o
	log := o.log.With().Str(logkey.JobID, r.ID).Str(logkey.Route, r.Route).Str(logkey.RemoteID, c.RemoteID).Logger()
	var was *state.Job
	id, from := r.ID, r
	err := o.keepRetrying(ctx, log, "recording the remote id", func(ctx context.Context) error {
		next, err := o.store.mutate(ctx, id, from, func(cur *state.Job) error {
			was = cloneJob(cur)
			return o.recordCreated(ctx, cur, c, log)
		})
		switch {
		case errors.Is(err, state.ErrNotFound):
			return fmt.Errorf("%w: %w", errPermanent, err)
		case err != nil:
			from = Record{} // read afresh next time: the write may have landed
			return err
		}
		r = next
		return nil
	})
	if err != nil {
		log.Error().Err(err).Msg("THE PROVIDER HAS THIS JOB but recording its remote id did not finish; the job will be in doubt")
		return Record{}, err
	}
	var published uint64
	if err := o.keepRetrying(ctx, log, "publishing the job's events", func(ctx context.Context) error {
		var err error
		published, err = o.publish(ctx, r.Job)
		return err
	}); err != nil {
		return r, err
	}
	o.finished(was, r.Job)
	if r.State.Terminal() {
		return r, nil
	}
	return r, o.keepRetrying(ctx, log, "arming the job's check", func(ctx context.Context) error {
		return o.arm(ctx, r.Job, r.NextCheckAt, published)
	})
}

// recordCreated writes a create's answer into the record.
func (o *Owner) recordCreated(ctx context.Context, cur *state.Job, c Created, log zerolog.Logger) error {
	switch {
	case cur.RemoteID == c.RemoteID:
		return errNoWrite // recorded already (a retry whose write had landed)
	case cur.RemoteID != "":
		log.Error().Str(logkey.RecordedRemoteID, cur.RemoteID).Msg("the provider created the job a second time; keeping the first remote id")
		return errNoWrite
	}
	if err := o.settleOutbox(ctx, cur, 0); err != nil {
		return err
	}
	if cur.State.Terminal() {
		// Declared in doubt meanwhile by a process that took the
		// submission over (this one lost NATS for longer than the intake
		// ack wait). Terminal states absorb; the remote id is kept for
		// operators.
		log.Error().Str(logkey.State, string(cur.State)).Msg("the job was given up as in doubt while its create succeeded; the remote id is recorded, the job stays " + string(cur.State))
		cur.RemoteID, cur.ProviderRef, cur.SubmitInDoubt = c.RemoteID, c.Ref, false
		if cur.State == state.Lost {
			cur.Reason += fmt.Sprintf("; the create's answer came after all: the provider has the job as %s, which Pollux does not follow (pollux track --route %s --remote-id %s --model %s does)",
				c.RemoteID, cur.Route, c.RemoteID, cur.Model)
		}
		return nil
	}
	now := c.Obs.At
	cur.RemoteID = c.RemoteID
	cur.ProviderRef = c.Ref
	cur.SubmitInDoubt = false
	if (cur.Routing == nil || !cur.Routing.Hedge) && !cur.KeepInput {
		cur.Input = nil // kept only for a hedge's submission, or by the route's keep_inputs
	}
	cur.SubmittedAt = cmp.Or(c.Obs.CreatedAt, now)
	cur.State, cur.ChangedAt = state.Queued, now
	cur.Record(events.EventSubmitted, now)
	cur.Apply(c.Obs)
	cur.NextCheckAt = c.Due.UTC()
	return nil
}

// Refused records a submit call the provider answered without creating
// the job: the attempt is no longer in doubt. With final, the job ends
// with it (the provider refused the submission itself).
func (in Intake) Refused(ctx context.Context, r Record, lastError string, final *state.Observation) (Record, error) {
	return in.refused(ctx, r, lastError, final, false)
}

// Failed records a submit call the provider answered with a failure of
// the job's own (a 5xx): the attempt is no longer in doubt, and the job's
// SubmitFailures, which its next try's backoff grows with, counts one
// more.
func (in Intake) Failed(ctx context.Context, r Record, lastError string) (Record, error) {
	return in.refused(ctx, r, lastError, nil, true)
}

func (in Intake) refused(ctx context.Context, r Record, lastError string, final *state.Observation, failed bool) (Record, error) {
	o := in.o
	attempt := r.AttemptID
	apply := func(cur *state.Job) bool {
		changed := cur.SubmitInDoubt || cur.LastError != lastError
		if failed && cur.SubmitInDoubt && cur.AttemptID == attempt {
			cur.SubmitFailures++ // once per attempt: a retried write finds it counted
			changed = true
		}
		cur.SubmitInDoubt, cur.LastError = false, lastError
		if final != nil && cur.Apply(*final) != "" {
			changed = true
		}
		return changed
	}
	if final != nil {
		return o.outside(ctx, r.ID, r.Route, r, change{apply: apply})
	}
	return o.store.mutate(ctx, r.ID, r, func(cur *state.Job) error {
		if !apply(cur) {
			return errNoWrite
		}
		return nil
	})
}

// Requeue records a create the provider refused for its cap on jobs
// running at once: the attempt is no longer in doubt, and the job gives
// its running slots back (freed once the write lands, see records.update)
// to wait for one again, as waitingFor says (its waiting event is
// published).
func (in Intake) Requeue(ctx context.Context, r Record, lastError, waitingFor string) (Record, error) {
	o := in.o
	return o.wait(ctx, r, func(cur *state.Job) bool {
		if cur.RemoteID != "" || cur.State.Terminal() {
			return false // created or ended meanwhile (a retry of this write)
		}
		cur.SubmitInDoubt, cur.LastError, cur.WaitingFor, cur.Slots = false, lastError, waitingFor, nil
		return true
	})
}

// A Guard names the jobs End leaves as they are.
type Guard int

const (
	// Always ends any job. A job that is terminal already keeps its state
	// (the observation is kept as Late). For the provider's refusal of
	// the submission (failed), an outcome in doubt that cannot be retried
	// (lost), a cancel before the submission.
	Always Guard = iota
	// UnlessSubmitted ends only a job that never reached the provider —
	// no remote id, no submit call under way or in doubt (a cancel, an
	// expiry while it waited for a running slot). It writes nothing when
	// a call started meanwhile: the submission then carries the cancel
	// out, or the poller the deadline.
	UnlessSubmitted
	// UnlessSettled ends only a submission still in doubt (with lost), as
	// r left it — unless the record moved on since r was read: the
	// attempt's own process recorded its result, or another attempt
	// started. Then it writes nothing and returns the record as it is,
	// for the caller to take up. The job stays in doubt: whether the
	// provider has it is not known, and the record says so.
	UnlessSettled
)

// End ends a job with a terminal observation of the caller's, but not a
// job guard leaves as it is (then it writes nothing and returns the
// record).
func (in Intake) End(ctx context.Context, r Record, obs state.Observation, guard Guard) (Record, error) {
	o := in.o
	attempt := r.AttemptID
	return o.outside(ctx, r.ID, r.Route, r, change{apply: func(cur *state.Job) bool {
		switch guard {
		case UnlessSubmitted:
			if cur.RemoteID != "" || cur.SubmitInDoubt || cur.State.Terminal() {
				return false
			}
		case UnlessSettled:
			if !cur.SubmitInDoubt || cur.RemoteID != "" || cur.AttemptID != attempt {
				return false
			}
		}
		return cur.Apply(obs) != ""
	}})
}

// ErrOtherRoute is returned for a request about a job on another route.
var ErrOtherRoute = errors.New("the job is on another route")

// RequestCancelBy is Owner.RequestCancel, for a cancel request's
// message.
func (in Intake) RequestCancelBy(ctx context.Context, route, id, reason, by string) (Record, bool, error) {
	return in.o.RequestCancel(ctx, route, id, reason, by)
}

// Canceled records the provider's answer to a cancel call: the job ends
// at once when the answer is final; otherwise its next poll is brought
// forward to confirm (see outside for when the check is left to the
// poller instead).
func (in Intake) Canceled(ctx context.Context, r Record, obs state.Observation) (Record, error) {
	o := in.o
	return o.outside(ctx, r.ID, r.Route, r, change{
		apply:  func(cur *state.Job) bool { return cur.Apply(obs) != "" },
		sooner: o.now().Add(time.Second),
	})
}

// Reject publishes a rejected event for an intake message on the job's
// event subject (the route and id are replaced by "_" placeholders when
// they are not valid tokens). A redelivered message is rejected once.
func (in Intake) Reject(ctx context.Context, route, id string, r events.Rejection) error {
	o := in.o
	if !events.ValidToken(route) {
		route = "_"
	}
	if !events.ValidToken(id) {
		id = "_"
	}
	ev := &events.Event{V: events.Version, Type: events.EventRejected, Time: o.now().UTC(), Route: route, JobID: id, Rejection: &r}
	b, err := ev.Encode()
	if err != nil {
		return err
	}
	var opts []jetstream.PublishOpt
	if r.IntakeSeq > 0 {
		opts = append(opts, jetstream.WithMsgID(fmt.Sprintf("rejected:%d", r.IntakeSeq)))
	}
	if _, err := o.js.Publish(ctx, o.ns.Event(route, id), b, opts...); err != nil {
		return fmt.Errorf("publish rejection: %w", err)
	}
	if o.hooks.Published != nil {
		o.hooks.Published(route, events.EventRejected)
	}
	return nil
}

// Hold records that a job not yet submitted waits before its create, for
// what waitingFor says (state.Job.WaitingFor: its route is paused, a
// level's running slots are taken, others queue before it), and publishes
// its waiting event, so that lists show it and why. It writes nothing when
// the job waits for that already, or when it moved on — submitted, ended,
// a create under way or in doubt, a cancel requested (that submission ends
// it) — and returns the record either way.
func (in Intake) Hold(ctx context.Context, r Record, waitingFor string) (Record, error) {
	o := in.o
	return o.wait(ctx, r, func(cur *state.Job) bool {
		if cur.RemoteID != "" || cur.State.Terminal() || cur.SubmitInDoubt || !cur.CancelRequestedAt.IsZero() ||
			cur.WaitingFor == waitingFor {
			return false
		}
		cur.WaitingFor = waitingFor
		return true
	})
}

// wait writes apply's change to a job that has no check (it is not
// submitted), with a waiting event when what it waits for changed to
// something, and publishes the events. A publish that fails leaves them
// in the record, for the job's next write to publish.
func (o *Owner) wait(ctx context.Context, r Record, apply func(cur *state.Job) bool) (Record, error) {
	wrote := false
	r, err := o.store.mutate(ctx, r.ID, r, func(cur *state.Job) error {
		was := cur.WaitingFor
		if wrote = apply(cur); !wrote {
			return errNoWrite
		}
		// What earlier writers left goes out first (the waiting event of
		// a create whose publish failed).
		if err := o.settleOutbox(ctx, cur, 0); err != nil {
			return err
		}
		if cur.WaitingFor != "" && cur.WaitingFor != was {
			cur.Record(events.EventWaiting, o.now().UTC())
		}
		return nil
	})
	if err != nil || !wrote || len(r.Outbox) == 0 {
		return r, err
	}
	if _, err := o.publish(ctx, r.Job); err != nil {
		o.log.Warn().Err(err).Str(logkey.JobID, r.ID).Msg("publishing the waiting job's event failed; its next write publishes it")
	}
	return r, nil
}

// IndexRemote records that the route's remote job remoteID is job id.
func (in Intake) IndexRemote(ctx context.Context, route, remoteID, id string) error {
	o := in.o
	_, err := o.res.Deliveries.Put(ctx, remoteKey(route, remoteID), []byte(id))
	return err
}
