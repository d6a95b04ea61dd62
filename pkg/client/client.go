// Package client is the Go client of a Pollux deployment: it submits,
// tracks and cancels jobs on Pollux's intake subjects, reads their records
// and follows their events, in the contract's own types (package events
// and state). It needs a NATS connection to the deployment and nothing
// else: no Pollux process is called directly.
//
//	c, err := client.New(nc)
//	job, err := c.Submit(ctx, "replicate", events.Submit{Model: "owner/model", Input: input, IdempotencyKey: key})
//	final, err := c.Wait(ctx, job) // the terminal event: succeeded, failed, canceled, expired, lost
//
// A submission is stored by JetStream before Submit returns, so it is
// never lost; Pollux's ingest takes it from there. Resubmitting with the
// same idempotency key (or id) is the same job, so a caller that is not
// sure its Submit went through simply calls it again. Everything Submit,
// Track and Cancel send is validated first with the contract's own rules,
// and an error names the field.
//
// A message Pollux refuses later (a route it does not serve, say) is
// answered with a "rejected" event on the job's subject: Wait and Events
// return it as a *RejectedError.
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Client talks to one Pollux deployment (one subject prefix) over a NATS
// connection. It is safe for concurrent use.
type Client struct {
	js jetstream.JetStream
	ns events.Namespace
}

// Option configures a Client.
type Option func(*options)

type options struct {
	prefix string
}

// WithPrefix selects the deployment by its subject prefix (default
// "pollux", what Pollux's `prefix` setting defaults to).
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// New returns a client of the deployment reached through nc.
func New(nc *nats.Conn, opts ...Option) (*Client, error) {
	o := options{prefix: events.Default.Prefix()}
	for _, opt := range opts {
		opt(&o)
	}
	ns, err := events.NewNamespace(o.prefix)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("pollux client: %w", err)
	}
	return &Client{js: js, ns: ns}, nil
}

// Job names a job: its route and its id, all the client needs to follow,
// cancel or read it.
type Job struct {
	Route, ID string
}

// ErrNotFound is returned by Get for a job Pollux has no record of (not
// yet taken from the intake, or never submitted).
var ErrNotFound = state.ErrNotFound

// RejectedError is a message Pollux refused after it was stored: what the
// "rejected" event said.
type RejectedError struct {
	Job       Job
	Rejection events.Rejection
}

func (e *RejectedError) Error() string {
	msg := fmt.Sprintf("pollux rejected the %s of job %s on route %s", e.Rejection.Kind, e.Job.ID, e.Job.Route)
	if e.Rejection.Field != "" {
		msg += ": field " + e.Rejection.Field
	}
	return msg + ": " + e.Rejection.Error
}

// Submit publishes a submission to route and returns its job once
// JetStream has stored it. s.V is set for the caller. Without an ID or an
// IdempotencyKey, a random idempotency key is drawn, so that the job id
// is known (events.KeyID) and a retry of this call would make a second
// job: give a key to make retries safe.
func (c *Client) Submit(ctx context.Context, route string, s events.Submit) (Job, error) {
	s.V = events.Version
	if s.ID == "" && s.IdempotencyKey == "" {
		s.IdempotencyKey = randomKey()
	}
	if len(s.Input) == 0 {
		s.Input = json.RawMessage(`{}`)
	}
	id := s.ID
	if id == "" {
		id = events.AppKeyID(route, s.App, s.IdempotencyKey)
	}
	job := Job{Route: route, ID: id}
	data, err := json.Marshal(s)
	if err != nil {
		return Job{}, fmt.Errorf("submit to route %s: %w", route, err)
	}
	if _, err := events.DecodeSubmit(data); err != nil {
		return Job{}, fmt.Errorf("submit to route %s: %w", route, err)
	}
	return job, c.publish(ctx, c.ns.Submit(route), data, "submit", job)
}

// Track asks Pollux to track a job submitted elsewhere (t.RemoteID at the
// route's provider) and returns it; without t.ID its id is derived from
// the remote id, so tracking it twice is one job.
func (c *Client) Track(ctx context.Context, route string, t events.Track) (Job, error) {
	t.V = events.Version
	id := t.ID
	if id == "" && t.RemoteID != "" {
		id = events.AppRemoteKeyID(route, t.App, t.RemoteID)
	}
	job := Job{Route: route, ID: id}
	data, err := json.Marshal(t)
	if err != nil {
		return Job{}, fmt.Errorf("track on route %s: %w", route, err)
	}
	if _, err := events.DecodeTrack(data); err != nil {
		return Job{}, fmt.Errorf("track on route %s: %w", route, err)
	}
	return job, c.publish(ctx, c.ns.Track(route), data, "track", job)
}

// Cancel asks Pollux to cancel job, with an optional reason kept in its
// record. It returns once the request is stored; the job's "canceled"
// event (or its end, if it ended first) follows.
func (c *Client) Cancel(ctx context.Context, job Job, reason string) error {
	data, err := json.Marshal(events.Cancel{V: events.Version, ID: job.ID, Reason: reason})
	if err != nil {
		return fmt.Errorf("cancel job %s: %w", job.ID, err)
	}
	if _, err := events.DecodeCancel(data); err != nil {
		return fmt.Errorf("cancel job %s: %w", job.ID, err)
	}
	return c.publish(ctx, c.ns.Cancel(job.Route), data, "cancel", job)
}

func (c *Client) publish(ctx context.Context, subject string, data []byte, what string, job Job) error {
	if _, err := c.js.Publish(ctx, subject, data); err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			err = fmt.Errorf("%w (is Pollux set up on this NATS server with prefix %q?)", err, c.ns.Prefix())
		}
		return fmt.Errorf("%s job %s on route %s: %w", what, job.ID, job.Route, err)
	}
	return nil
}

// Get reads the job's record as Pollux keeps it (its public part:
// state.Job.Snapshot). ErrNotFound: no such job yet.
func (c *Client) Get(ctx context.Context, id string) (*state.Job, error) {
	if !events.ValidToken(id) {
		return nil, fmt.Errorf("get job %q: not a valid job id", id)
	}
	kv, err := c.js.KeyValue(ctx, c.ns.JobsBucket())
	if err != nil {
		return nil, fmt.Errorf("get job %s: the jobs bucket: %w", id, err)
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("get job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	j, err := state.Decode(e.Value())
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	return j.Snapshot(), nil
}

// Events yields the job's events in order, from its first, as they come,
// until ctx ends, its terminal event has been yielded, or a rejection (as
// a *RejectedError, the sequence's last). Breaking out of the loop stops
// it. Custody events (outputs_saved, outputs_expiring) may follow the
// terminal event, later: Events does not wait for them (read the job's
// subject on, or Get its record's custody).
func (c *Client) Events(ctx context.Context, job Job) iter.Seq2[*events.Event, error] {
	return func(yield func(*events.Event, error) bool) {
		cons, err := c.js.OrderedConsumer(ctx, c.ns.EventsStream(), jetstream.OrderedConsumerConfig{
			// Any route: a job submitted to a model route has its events
			// on the member it was routed to (ids are unique across
			// routes).
			FilterSubjects: []string{c.ns.Event("*", job.ID)},
		})
		if err != nil {
			yield(nil, fmt.Errorf("events of job %s: %w", job.ID, err))
			return
		}
		msgs, err := cons.Messages()
		if err != nil {
			yield(nil, fmt.Errorf("events of job %s: %w", job.ID, err))
			return
		}
		defer msgs.Stop()
		stop := context.AfterFunc(ctx, msgs.Stop)
		defer stop()
		var last uint64
		for {
			msg, err := msgs.Next()
			if err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(nil, fmt.Errorf("events of job %s: %w", job.ID, err))
				return
			}
			ev, err := events.DecodeEvent(msg.Data())
			switch {
			case err != nil:
				continue // not an event this client can read: skipped
			case ev.Type == events.EventRejected:
				rej := &RejectedError{Job: job}
				if ev.Rejection != nil {
					rej.Rejection = *ev.Rejection
				}
				yield(ev, rej)
				return
			case ev.Seq != 0 && ev.Seq <= last:
				continue // a duplicate
			}
			last = ev.Seq
			if !yield(ev, nil) || terminal(ev) {
				return
			}
		}
	}
}

// terminal reports whether ev is a job's terminal event: of a terminal
// state, and not a custody event (which carries the terminal state too).
func terminal(ev *events.Event) bool {
	return ev.State.Terminal() && !events.CustodyEvent(ev.Type)
}

// Wait returns the job's terminal event (the job's record as it ended is
// its Job), waiting until it comes or ctx ends — never a custody event
// that follows it. A rejection is returned as a *RejectedError.
func (c *Client) Wait(ctx context.Context, job Job) (*events.Event, error) {
	for ev, err := range c.Events(ctx, job) {
		if err != nil {
			return ev, err
		}
		if terminal(ev) {
			return ev, nil
		}
	}
	return nil, fmt.Errorf("wait for job %s: %w", job.ID, ctx.Err())
}

func randomKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "go-" + hex.EncodeToString(b)
}
