package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Connection is how the client commands reach NATS.
type Connection struct {
	NATSURL string `name:"nats-url" env:"POLLUX_NATS_URL" default:"nats://127.0.0.1:4222" help:"NATS server URL(s)."`
	Creds   string `name:"nats-creds" env:"POLLUX_NATS_CREDS" help:"NATS credentials file."`
	Prefix  string `name:"prefix" env:"POLLUX_PREFIX" default:"pollux" help:"Subject prefix of the Pollux deployment."`
}

func (c Connection) open() (*nats.Conn, jetstream.JetStream, events.Namespace, error) {
	ns, err := events.NewNamespace(c.Prefix)
	if err != nil {
		return nil, nil, ns, err
	}
	nc, err := nats.Connect(c.NATSURL, nats.Name("pollux-cli"), credsOption(c.Creds))
	if err != nil {
		return nil, nil, ns, fmt.Errorf("connect to NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, ns, err
	}
	return nc, js, ns, nil
}

func credsOption(path string) nats.Option {
	if path == "" {
		return func(*nats.Options) error { return nil }
	}
	return nats.UserCredentials(path)
}

// SubmitCmd is `pollux submit`.
type SubmitCmd struct {
	Connection     `embed:""`
	Route          string        `name:"route" env:"POLLUX_ROUTE" required:"" help:"Route to submit to."`
	Model          string        `name:"model" required:"" help:"Provider model identifier."`
	Input          string        `name:"input" default:"{}" help:"Provider input, a JSON object."`
	ID             string        `name:"id" help:"Job id (default: derived from the idempotency key)."`
	IdempotencyKey string        `name:"idempotency-key" help:"Idempotency key (default: random)."`
	Timeout        time.Duration `name:"timeout" help:"Job deadline, relative (default: the route's)."`
	Wait           bool          `name:"wait" help:"Print the job's events until it finishes; exit non-zero unless it succeeds (a rejection is reported at once)."`
	WaitTimeout    time.Duration `name:"wait-timeout" default:"1h" help:"Stop waiting after this long."`
	WaitNotice     time.Duration `name:"wait-notice" env:"POLLUX_WAIT_NOTICE" default:"10s" hidden:"" help:"With --wait, say after this long without an event whether any ingest is taking the route's submissions."`
}

// flagOf names the flag that sets a submission field.
var flagOf = map[string]string{
	"id": "--id", "idempotency_key": "--idempotency-key", "model": "--model", "input": "--input", "timeout_s": "--timeout",
	"remote_id": "--remote-id", "reason": "--reason",
}

// message validates the flags and returns the submission to publish and
// its job id: everything is checked before a connection is made.
func (c *SubmitCmd) message() ([]byte, string, error) {
	if err := intakeFlags(c.Route, c.Timeout, c.Wait, c.WaitTimeout); err != nil {
		return nil, "", err
	}
	var input any
	if err := json.Unmarshal([]byte(c.Input), &input); err != nil {
		return nil, "", fmt.Errorf("--input: not JSON (%w); give a JSON object, such as '{\"prompt\":\"a red kite\"}'", err)
	}
	key := c.IdempotencyKey
	if key == "" && c.ID == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		key = "cli-" + hex.EncodeToString(b)
	}
	id := c.ID
	if id == "" {
		id = events.KeyID(c.Route, key)
	}
	sub := events.Submit{V: events.Version, ID: c.ID, IdempotencyKey: key, Model: c.Model,
		Input: json.RawMessage(c.Input), TimeoutS: c.Timeout.Seconds()}
	data, err := json.Marshal(sub)
	if err != nil {
		return nil, "", fmt.Errorf("--input: %w", err)
	}
	if _, err := events.DecodeSubmit(data); err != nil {
		return nil, "", flagError(err)
	}
	return data, id, nil
}

// intakeFlags checks the flags submit and track share.
func intakeFlags(route string, timeout time.Duration, wait bool, waitTimeout time.Duration) error {
	if !events.ValidToken(route) {
		return fmt.Errorf("--route: %q is not a route name (1-128 characters of [A-Za-z0-9_-])", route)
	}
	if timeout < 0 {
		return fmt.Errorf("--timeout: must not be negative (got %s)", timeout)
	}
	if wait {
		return positive("wait-timeout", waitTimeout)
	}
	return nil
}

// flagError names the flag that set the field a contract error is about.
func flagError(err error) error {
	var fe *events.FieldError
	if errors.As(err, &fe) && flagOf[fe.Field] != "" {
		return fmt.Errorf("%s: %s", flagOf[fe.Field], fe.Problem)
	}
	return err
}

// Run publishes the submission.
func (c *SubmitCmd) Run(g *Globals) error {
	data, id, err := c.message()
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	nc, js, ns, err := c.open()
	if err != nil {
		return err
	}
	defer nc.Close()
	return c.submit(ctx, js, ns, data, id, g)
}

// ErrRejected is returned by a waiting submission that Pollux refused.
var ErrRejected = errors.New("rejected")

// submit publishes data as job id's submission and, with --wait, prints
// the job's events until its end: a job that did not succeed, or a
// rejection, is an error.
func (c *SubmitCmd) submit(ctx context.Context, js jetstream.JetStream, ns events.Namespace, data []byte, id string, g *Globals) error {
	var follow jetstream.ConsumeContext
	end := make(chan *events.Event, 1)
	seen := make(chan struct{})
	if c.Wait {
		var err error
		follow, err = followJob(ctx, js, ns, c.Route, id, g, seen, end)
		if err != nil {
			return err
		}
		defer follow.Stop()
	}
	if _, err := js.Publish(ctx, ns.Submit(c.Route), data); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	fmt.Fprintf(g.Stdout, "submitted job %s to route %s\n", id, c.Route)
	if !c.Wait {
		return nil
	}
	timeout := time.NewTimer(c.WaitTimeout)
	defer timeout.Stop()
	notice := time.NewTimer(c.WaitNotice)
	defer notice.Stop()
	hint := ""
	for {
		select {
		case <-seen:
			notice.Stop()
			seen = nil
			continue
		case <-notice.C:
			if hint = ingestHint(ctx, js, ns, c.Route); hint != "" {
				fmt.Fprintf(g.Stderr, "no event for job %s after %s: %s\n", id, c.WaitNotice, hint)
				hint = " (" + hint + ")"
			}
			continue
		case ev := <-end:
			return waitResult(id, ev)
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("gave up waiting for job %s after %s (--wait-timeout)%s; it goes on: pollux get %s", id, c.WaitTimeout, hint, id)
		}
	}
}

// waitResult is a waited-for job's outcome from its last event: nil if it
// succeeded, an *endedError if it ended otherwise.
func waitResult(id string, ev *events.Event) error {
	switch {
	case ev.Rejection != nil:
		return fmt.Errorf("job %s %w: %s", id, ErrRejected, ev.Rejection.Error)
	case ev.State != state.Succeeded:
		e := &endedError{id: id, state: ev.State}
		if ev.Job != nil {
			e.reason = ev.Job.Reason
		}
		return e
	}
	return nil
}

// endedError is a job that ended other than succeeded.
type endedError struct {
	id     string
	state  state.State
	reason string
}

func (e *endedError) Error() string {
	if e.reason != "" {
		return fmt.Sprintf("job %s ended %s: %s", e.id, e.state, e.reason)
	}
	return fmt.Sprintf("job %s ended %s", e.id, e.state)
}

// ingestHint says why a submission may have no event yet when the route's
// ingest consumer shows no process taking its messages, else "". It is a
// hint: an ingest between two pulls looks the same for a moment.
func ingestHint(ctx context.Context, js jetstream.JetStream, ns events.Namespace, route string) string {
	cons, err := js.Consumer(ctx, ns.IntakeStream(), ns.IngestConsumer(route))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Sprintf("no ingest has served route %s (its consumer %s does not exist): is cmd/ingest running with this route configured?", route, ns.IngestConsumer(route))
	}
	if err != nil {
		return ""
	}
	info := cons.CachedInfo() // fetched just now by Consumer
	if info.NumWaiting > 0 || info.NumPending == 0 {
		return ""
	}
	return fmt.Sprintf("no ingest is taking route %s's submissions (%d waiting, none pulling): is cmd/ingest running?", route, info.NumPending)
}

// followJob prints the job's events as they come, closes seen at the
// first, and sends the first terminal event or rejection to end.
func followJob(ctx context.Context, js jetstream.JetStream, ns events.Namespace, route, id string, g *Globals, seen chan<- struct{}, end chan<- *events.Event) (jetstream.ConsumeContext, error) {
	c, err := js.OrderedConsumer(ctx, ns.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{ns.Event("*", id)}, // any route: a model route's job is on its member
	})
	if err != nil {
		return nil, err
	}
	closed, first := false, true
	return c.Consume(func(msg jetstream.Msg) {
		ev, err := events.DecodeEvent(msg.Data())
		if err != nil || closed {
			return
		}
		if first {
			first = false
			close(seen)
		}
		fmt.Fprintln(g.Stdout, eventLine(ev))
		if ev.Type == events.EventRejected || ev.State.Terminal() {
			closed = true
			end <- ev
		}
	})
}

// eventLine is how the client commands print an event.
func eventLine(ev *events.Event) string {
	line := fmt.Sprintf("%s  %-9s", ev.Time.Local().Format(time.TimeOnly), ev.Type)
	switch {
	case ev.Rejection != nil:
		line += "  " + ev.Rejection.Error
	case ev.Job != nil:
		line += "  state=" + string(ev.Job.State)
		if ev.Job.Reason != "" {
			line += " reason=" + ev.Job.Reason
		}
		if ev.Type == events.EventWaiting && ev.Job.WaitingFor != "" {
			line += fmt.Sprintf(" waiting_for=%q", ev.Job.WaitingFor)
		}
		if len(ev.Job.Outputs) > 0 {
			line += fmt.Sprintf(" outputs=%v", ev.Job.Outputs)
		}
	}
	return line
}

// GetCmd is `pollux get`.
type GetCmd struct {
	Connection `embed:""`
	ID         string `arg:"" help:"Job id."`
}

// Run prints the job's record and its events.
func (c *GetCmd) Run(g *Globals) error {
	if !events.ValidToken(c.ID) {
		return fmt.Errorf("%q is not a valid job id: a job id is 1-128 characters of [A-Za-z0-9_-]", c.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, js, ns, err := c.open()
	if err != nil {
		return err
	}
	defer nc.Close()
	return c.get(ctx, js, ns, g)
}

func (c *GetCmd) get(ctx context.Context, js jetstream.JetStream, ns events.Namespace, g *Globals) error {
	res, err := ns.Open(ctx, js)
	if err != nil {
		return err
	}
	j, err := jobs.New(ns, js, res, jobs.Config{}).Get(ctx, c.ID)
	if errors.Is(err, state.ErrNotFound) {
		// A refused submission has no record, only its rejection.
		evs, herr := history(ctx, js, ns, "*", c.ID)
		if herr != nil {
			return herr
		}
		for _, ev := range slices.Backward(evs) {
			if ev.Rejection != nil {
				return fmt.Errorf("no job %s: its %s was rejected: %s", c.ID, ev.Rejection.Kind, ev.Rejection.Error)
			}
		}
		return fmt.Errorf("no job %s (a submission shows once ingest has taken it)", c.ID)
	}
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(frontdoor.JobView(j), "", "  ")
	fmt.Fprintf(g.Stdout, "job %s (updated %s)\n%s\n\nevents:\n", c.ID, j.UpdatedAt.Local().Format(time.DateTime), b)
	evs, err := history(ctx, js, ns, j.Route, c.ID)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		fmt.Fprintf(g.Stdout, "  #%-3d %s  %-9s state=%s\n", ev.Seq, ev.Time.Local().Format(time.DateTime), ev.Type, ev.State)
	}
	ds, err := events.OutboxDeliveries(ctx, js, ns, c.ID)
	if err != nil {
		return err
	}
	if len(ds) > 0 {
		fmt.Fprintf(g.Stdout, "\noutbound webhooks:\n")
	}
	for _, d := range ds {
		line := fmt.Sprintf("  %-12s %-10s event #%d, %d attempt(s) (%d in all), last %s: %s", d.Endpoint, d.State, d.Seq, d.Attempts, d.Total,
			d.LastAt.Local().Format(time.DateTime), d.Last)
		if !d.NextAt.IsZero() {
			line += ", next " + d.NextAt.Local().Format(time.DateTime)
		}
		fmt.Fprintln(g.Stdout, line)
	}
	return nil
}

// history reads a job's events from the start of the events stream.
func history(ctx context.Context, js jetstream.JetStream, ns events.Namespace, route, id string) ([]*events.Event, error) {
	c, err := js.OrderedConsumer(ctx, ns.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{ns.Event("*", id)}, // any route: a model route's job is on its member
	})
	if err != nil {
		return nil, err
	}
	var out []*events.Event
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(time.Second))
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
			return out, nil // no (more) events
		}
		if err != nil {
			return nil, err
		}
		if ev, err := events.DecodeEvent(msg.Data()); err == nil {
			out = append(out, ev)
		}
		if md, err := msg.Metadata(); err == nil && md.NumPending == 0 {
			return out, nil
		}
	}
}
