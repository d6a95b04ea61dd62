package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
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
	Wait           bool          `name:"wait" help:"Print the job's events until it finishes."`
	WaitTimeout    time.Duration `name:"wait-timeout" default:"1h" help:"Stop waiting after this long."`
}

// Run publishes the submission.
func (c *SubmitCmd) Run(g *Globals) error {
	ctx, stop := signalContext()
	defer stop()
	nc, js, ns, err := c.open()
	if err != nil {
		return err
	}
	defer nc.Close()
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
		return fmt.Errorf("input: %w", err)
	}
	if _, err := events.DecodeSubmit(data); err != nil {
		return err
	}
	var follow jetstream.ConsumeContext
	done := make(chan struct{})
	if c.Wait {
		follow, err = followJob(ctx, js, ns, c.Route, id, g, done)
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
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(c.WaitTimeout):
		return errors.New("gave up waiting")
	}
}

// followJob prints the job's events as they come and closes done at a
// terminal event or a rejection.
func followJob(ctx context.Context, js jetstream.JetStream, ns events.Namespace, route, id string, g *Globals, done chan struct{}) (jetstream.ConsumeContext, error) {
	c, err := js.OrderedConsumer(ctx, ns.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{ns.Event(route, id)},
	})
	if err != nil {
		return nil, err
	}
	closed := false
	return c.Consume(func(msg jetstream.Msg) {
		ev, err := events.DecodeEvent(msg.Data())
		if err != nil || closed {
			return
		}
		line := fmt.Sprintf("%s  %-9s", ev.Time.Local().Format(time.TimeOnly), ev.Type)
		switch {
		case ev.Rejection != nil:
			line += "  " + ev.Rejection.Error
		case ev.Job != nil:
			line += "  state=" + string(ev.Job.State)
			if ev.Job.Reason != "" {
				line += " reason=" + ev.Job.Reason
			}
			if len(ev.Job.Outputs) > 0 {
				line += fmt.Sprintf(" outputs=%v", ev.Job.Outputs)
			}
		}
		fmt.Fprintln(g.Stdout, line)
		if ev.Type == events.EventRejected || ev.State.Terminal() {
			closed = true
			close(done)
		}
	})
}

// GetCmd is `pollux get`.
type GetCmd struct {
	Connection `embed:""`
	ID         string `arg:"" help:"Job id."`
}

// Run prints the job's record and its events.
func (c *GetCmd) Run(g *Globals) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, js, ns, err := c.open()
	if err != nil {
		return err
	}
	defer nc.Close()
	res, err := ns.Open(ctx, js)
	if err != nil {
		return err
	}
	j, err := jobs.New(ns, js, res, jobs.Config{}).Get(ctx, c.ID)
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(j.Snapshot(), "", "  ")
	fmt.Fprintf(g.Stdout, "job %s (updated %s)\n%s\n\nevents:\n", c.ID, j.UpdatedAt.Local().Format(time.DateTime), b)
	evs, err := history(ctx, js, ns, j.Route, c.ID)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		fmt.Fprintf(g.Stdout, "  #%-3d %s  %-9s state=%s\n", ev.Seq, ev.Time.Local().Format(time.DateTime), ev.Type, ev.State)
	}
	return nil
}

// history reads a job's events from the start of the events stream.
func history(ctx context.Context, js jetstream.JetStream, ns events.Namespace, route, id string) ([]*events.Event, error) {
	c, err := js.OrderedConsumer(ctx, ns.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{ns.Event(route, id)},
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
