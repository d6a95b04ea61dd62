// Package lifecycle is the one place where a job's record and the streams
// around it change together: compare-and-set writes of the record, the
// events those writes recorded (published from the record's outbox, so no
// event is lost when a process dies between the write and the publish), the
// job's check message (armed, re-armed, disarmed) and rejections.
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Hooks observe what the lifecycle does; nil fields are ignored. Hooks must
// not block.
type Hooks struct {
	// Published is called for every event published.
	Published func(route, typ string)
	// Terminal is called once for each job a write made terminal, whichever
	// service made it.
	Terminal func(j *state.Job)
}

// Lifecycle changes jobs and publishes what changed.
type Lifecycle struct {
	ns     events.Namespace
	store  *state.Store
	js     jetstream.JetStream
	checks jetstream.Stream
	log    zerolog.Logger
	hooks  Hooks
}

// New returns a Lifecycle over the namespace's resources.
func New(ns events.Namespace, js jetstream.JetStream, res *events.Resources, log zerolog.Logger, hooks Hooks) *Lifecycle {
	return &Lifecycle{ns: ns, store: state.NewStore(res.Jobs).ConfirmNotFound(js), js: js, checks: res.Checks, log: log, hooks: hooks}
}

// Store returns the job store.
func (l *Lifecycle) Store() *state.Store { return l.store }

// Namespace returns the namespace.
func (l *Lifecycle) Namespace() events.Namespace { return l.ns }

// Create stores a new job and publishes the events it recorded. It returns
// state.ErrExists when the id is taken.
func (l *Lifecycle) Create(ctx context.Context, j *state.Job) error {
	rev, err := l.store.Create(ctx, j)
	if err != nil {
		return err
	}
	return l.flush(ctx, j, rev)
}

// Update applies fn to the job's latest record with compare-and-set (fn may
// run more than once, on fresh copies) and then publishes the events fn
// recorded, along with any earlier ones still in the outbox.
func (l *Lifecycle) Update(ctx context.Context, id string, fn func(*state.Job) error) (*state.Job, error) {
	return l.update(ctx, id, nil, 0, fn)
}

// UpdateFrom is Update starting from a record the caller read at revision
// rev (see state.Store.MutateFrom): one read fewer when nobody wrote the
// job since. j must not be used afterwards.
func (l *Lifecycle) UpdateFrom(ctx context.Context, j *state.Job, rev uint64, fn func(*state.Job) error) (*state.Job, error) {
	return l.update(ctx, j.ID, j, rev, fn)
}

func (l *Lifecycle) update(ctx context.Context, id string, from *state.Job, rev uint64, fn func(*state.Job) error) (*state.Job, error) {
	var was state.State
	track := func(cur *state.Job) error {
		was = cur.State
		return fn(cur)
	}
	var j *state.Job
	var err error
	if from != nil {
		j, rev, err = l.store.MutateFrom(ctx, from, rev, track)
	} else {
		j, rev, err = l.store.Mutate(ctx, id, track)
	}
	if err != nil {
		return nil, err
	}
	if !was.Terminal() && j.State.Terminal() && l.hooks.Terminal != nil {
		l.hooks.Terminal(j)
	}
	if err := l.flush(ctx, j, rev); err != nil {
		return j, err
	}
	return j, nil
}

// Flush publishes the job's outbox in order and then removes the published
// entries from the record. Republishing an event is harmless: its message id
// makes the stream drop the duplicate, and its per-job seq lets readers
// drop one the stream no longer remembers.
func (l *Lifecycle) Flush(ctx context.Context, j *state.Job) error { return l.flush(ctx, j, 0) }

// FlushAt is Flush of a record read at revision rev: the outbox is cleared
// from that revision, without reading the job again.
func (l *Lifecycle) FlushAt(ctx context.Context, j *state.Job, rev uint64) error {
	return l.flush(ctx, j, rev)
}

// flush is Flush knowing the revision j was read or written at (0: not
// known), so that clearing the outbox usually needs no read.
func (l *Lifecycle) flush(ctx context.Context, j *state.Job, rev uint64) error {
	if len(j.Outbox) == 0 {
		return nil
	}
	var last uint64
	for _, p := range j.Outbox {
		ev := events.NewEvent(j, p)
		b, err := ev.Encode()
		if err != nil {
			return fmt.Errorf("encode event %d of job %s: %w", p.Seq, j.ID, err)
		}
		msg := &nats.Msg{Subject: l.ns.Event(j.Route, j.ID), Data: b, Header: nats.Header{}}
		if _, err := l.js.PublishMsg(ctx, msg, jetstream.WithMsgID(events.MsgID(j.ID, p.Seq))); err != nil {
			return fmt.Errorf("publish %s event of job %s: %w", p.Type, j.ID, err)
		}
		last = p.Seq
		if l.hooks.Published != nil {
			l.hooks.Published(j.Route, p.Type)
		}
		l.log.Debug().Str("job_id", j.ID).Str("route", j.Route).Str("event", p.Type).Uint64("seq", p.Seq).Msg("event published")
	}
	clear := func(cur *state.Job) error {
		if !cur.Published(last) {
			return state.ErrNoChange
		}
		return nil
	}
	var err error
	if rev > 0 {
		// A copy: the caller keeps j, and it must not see a failed write.
		cp := *j
		cp.Outbox = slices.Clone(j.Outbox)
		_, _, err = l.store.MutateFrom(ctx, &cp, rev, clear)
	} else {
		_, _, err = l.store.Mutate(ctx, j.ID, clear)
	}
	if err != nil {
		return fmt.Errorf("clear outbox of job %s: %w", j.ID, err)
	}
	j.Published(last)
	return nil
}

// JetStream's refusals of a check publish whose expectation failed: a
// message other than the expected one is on the subject (or none is), or
// (a checks stream from before poll contexts, which discards new messages
// per subject) the job is already armed.
const (
	errCodeWrongLastSequence = 10071
	errCodeMaxMsgsPerSubject = 10077
)

// ErrCheckMoved is returned by Replace when the check is no longer the one
// the caller held: another process replaced or removed it.
var ErrCheckMoved = errors.New("the check message was replaced or removed meanwhile")

// Arm publishes the job's check message, carrying its poll context and to
// be delivered no earlier than notBefore. A job has at most one; arming an
// armed job changes nothing.
func (l *Lifecycle) Arm(ctx context.Context, j *state.Job, notBefore time.Time) error {
	err := l.publishCheck(ctx, j, notBefore, 0)
	if errors.Is(err, ErrCheckMoved) {
		return nil // armed already
	}
	return err
}

// Replace puts a check carrying j's current poll context, due at
// notBefore, in place of the check message at stream sequence seq, in one
// atomic step: the stream keeps one message per job subject, so the
// publish drops the old one, and it is refused (ErrCheckMoved) unless the
// old one is still the subject's latest. Nothing can leave a job without a
// check in between.
func (l *Lifecycle) Replace(ctx context.Context, j *state.Job, seq uint64, notBefore time.Time) error {
	return l.publishCheck(ctx, j, notBefore, seq)
}

// publishCheck publishes j's check expecting the subject's latest message
// to be at sequence last (0: no message).
func (l *Lifecycle) publishCheck(ctx context.Context, j *state.Job, notBefore time.Time, last uint64) error {
	b, err := EncodeCheck(j, notBefore)
	if err != nil {
		return err
	}
	_, err = l.js.Publish(ctx, l.ns.Check(j.Route, j.ID), b, jetstream.WithExpectLastSequencePerSubject(last))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeWrongLastSequence || apiErr.ErrorCode == errCodeMaxMsgsPerSubject) {
		return ErrCheckMoved
	}
	if err != nil {
		return fmt.Errorf("arm check of job %s: %w", j.ID, err)
	}
	return nil
}

// rearmTries bounds Rearm's and Disarm's attempts while other processes
// replace the same check.
const rearmTries = 5

// Seen is a job's check message as CurrentCheck read it. Rearm and Disarm
// start from it rather than read it again; when it has been replaced
// meanwhile they read the current one.
type Seen struct {
	// Check is the message, nil when it cannot be decoded.
	Check *events.Check
	// Seq is its stream sequence; 0 when the job had no check.
	Seq uint64
	// Published is when it was published.
	Published time.Time
}

// CurrentCheck reads the job's check message (Seq 0: it has none).
func (l *Lifecycle) CurrentCheck(ctx context.Context, route, id string) (*Seen, error) {
	m, err := l.checks.GetLastMsgForSubject(ctx, l.ns.Check(route, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return &Seen{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read check of job %s: %w", id, err)
	}
	seen := &Seen{Seq: m.Sequence, Published: m.Time}
	seen.Check, _ = events.DecodeCheck(m.Data) // unreadable: still removable by its sequence
	return seen, nil
}

// Rearm replaces the job's check message with one due at notBefore (sooner
// than the one waiting, typically), carrying the job's poll context; it
// arms the job if it has no check. seen is the check as the caller read it
// (nil: Rearm reads it).
func (l *Lifecycle) Rearm(ctx context.Context, j *state.Job, notBefore time.Time, seen *Seen) error {
	for range rearmTries {
		if seen == nil {
			var err error
			if seen, err = l.CurrentCheck(ctx, j.Route, j.ID); err != nil {
				return fmt.Errorf("rearm: %w", err)
			}
		}
		err := l.publishCheck(ctx, j, notBefore, seen.Seq)
		if !errors.Is(err, ErrCheckMoved) {
			return err
		}
		seen = nil // replaced meanwhile: read the current one
	}
	return fmt.Errorf("rearm check of job %s: %w %d times", j.ID, ErrCheckMoved, rearmTries)
}

// Disarm removes the job's check message, so polling stops at once. seen
// is the check as the caller read it (nil: Disarm reads it).
//
// It deletes the message by its sequence number. A purge by subject would
// be one call, but on a work-queue stream it corrupts the state of a
// consumer with a wider filter: other jobs' checks that wait nak-delayed
// are dropped from the consumer while staying in the stream, never to be
// delivered again (nats-server 2.15.2, measured: 19 to 170 of 300 waiting
// checks lost; see nats-server#5727). TestDisarmKeepsOtherChecks guards this.
func (l *Lifecycle) Disarm(ctx context.Context, route, id string, seen *Seen) error {
	for range rearmTries {
		if seen == nil {
			var err error
			if seen, err = l.CurrentCheck(ctx, route, id); err != nil {
				return fmt.Errorf("disarm: %w", err)
			}
		}
		if seen.Seq == 0 {
			return nil // not armed
		}
		err := l.checks.DeleteMsg(ctx, seen.Seq)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
			return fmt.Errorf("disarm check of job %s: %w", id, err)
		}
		// Refused: the message is gone (acked, replaced, removed) since it
		// was read, which JetStream reports as "no message found" or
		// "sequence not found" without a code nats.go exposes. Look again;
		// a refusal of the message still current is a real failure.
		was := seen.Seq
		var rerr error
		if seen, rerr = l.CurrentCheck(ctx, route, id); rerr != nil {
			return fmt.Errorf("disarm: %w", rerr)
		}
		if seen.Seq == was {
			return fmt.Errorf("disarm check of job %s: %w", id, err)
		}
	}
	return fmt.Errorf("disarm check of job %s: replaced %d times meanwhile", id, rearmTries)
}

// maxCheckBytes keeps a check message within the checks stream's limit
// (events.MaxCheckBytes) with room for its headers.
const maxCheckBytes = events.MaxCheckBytes - 512

// EncodeCheck encodes job j's check message due at notBefore. A poll
// context too big for a check (a provider reference of kilobytes) is left
// out: the poller then reads the job record at every delivery.
func EncodeCheck(j *state.Job, notBefore time.Time) ([]byte, error) {
	c := events.NewCheck(j, notBefore)
	b, err := json.Marshal(c)
	if err == nil && len(b) > maxCheckBytes {
		c.Job = nil
		b, err = json.Marshal(c)
	}
	if err != nil {
		return nil, fmt.Errorf("encode check of job %s: %w", j.ID, err)
	}
	return b, nil
}

// Reject publishes a rejected event for an intake message on the job's
// event subject (the route and id are replaced by "_" placeholders when they
// are not valid tokens).
func (l *Lifecycle) Reject(ctx context.Context, route, id string, r events.Rejection, now time.Time) error {
	if !events.ValidToken(route) {
		route = "_"
	}
	if !events.ValidToken(id) {
		id = "_"
	}
	ev := &events.Event{V: events.Version, Type: events.EventRejected, Time: now.UTC(), Route: route, JobID: id, Rejection: &r}
	b, err := ev.Encode()
	if err != nil {
		return err
	}
	var opts []jetstream.PublishOpt
	if r.IntakeSeq > 0 {
		// A redelivered rejected message is rejected once.
		opts = append(opts, jetstream.WithMsgID(fmt.Sprintf("rejected:%d", r.IntakeSeq)))
	}
	if _, err := l.js.Publish(ctx, l.ns.Event(route, id), b, opts...); err != nil {
		return fmt.Errorf("publish rejection: %w", err)
	}
	if l.hooks.Published != nil {
		l.hooks.Published(route, events.EventRejected)
	}
	return nil
}
