package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pollux-dev/pollux/pkg/client"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// TrackCmd is `pollux track`: follow a job submitted elsewhere.
type TrackCmd struct {
	Connection  `embed:""`
	Route       string        `name:"route" env:"POLLUX_ROUTE" required:"" help:"Route of the provider the job was submitted to."`
	RemoteID    string        `name:"remote-id" required:"" help:"The provider's id of the job."`
	Model       string        `name:"model" required:"" help:"Provider model identifier (picks the learned durations)."`
	ID          string        `name:"id" help:"Job id (default: derived from the route and remote id, so tracking twice is one job)."`
	Timeout     time.Duration `name:"timeout" help:"Job deadline, relative (default: the route's)."`
	Wait        bool          `name:"wait" help:"Print the job's events until it finishes; exit non-zero unless it succeeds."`
	WaitTimeout time.Duration `name:"wait-timeout" default:"1h" help:"Stop waiting after this long."`
}

// Run publishes the track request.
func (c *TrackCmd) Run(g *Globals) error {
	if err := intakeFlags(c.Route, c.Timeout, c.Wait, c.WaitTimeout); err != nil {
		return err
	}
	t := events.Track{V: events.Version, ID: c.ID, RemoteID: c.RemoteID, Model: c.Model, TimeoutS: c.Timeout.Seconds()}
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if _, err := events.DecodeTrack(data); err != nil {
		return flagError(err)
	}
	return c.with(func(ctx context.Context, cl *client.Client) error {
		job, err := cl.Track(ctx, c.Route, t)
		if err != nil {
			return err
		}
		fmt.Fprintf(g.Stdout, "tracking job %s (%s at route %s)\n", job.ID, c.RemoteID, c.Route)
		if !c.Wait {
			return nil
		}
		return waitJob(ctx, cl, job, c.WaitTimeout, g)
	})
}

// CancelCmd is `pollux cancel`.
type CancelCmd struct {
	Connection  `embed:""`
	Bulk        `embed:""`
	IDs         []string      `arg:"" optional:"" help:"Job ids (one: over NATS, as before; several, or a filter: through the front door)."`
	Wait        bool          `name:"wait" help:"Print the job's events until it ends (one job)."`
	WaitTimeout time.Duration `name:"wait-timeout" default:"10m" help:"Stop waiting after this long."`
	// ID is the one job of a single cancel.
	ID string `kong:"-"`
}

// Run cancels the jobs: one named job over NATS, several or a filter's
// through the front door's bulk cancel, once confirmed.
func (c *CancelCmd) Run(g *Globals) error {
	if f, err := c.Filter.filter(time.Now()); err != nil || f != nil || len(c.IDs) != 1 {
		if c.Wait {
			return errors.New("--wait follows one job: name one, without a filter")
		}
		return c.run(g, "cancel", c.IDs)
	}
	c.ID = c.IDs[0]
	if !events.ValidToken(c.ID) {
		return fmt.Errorf("%q is not a valid job id: a job id is 1-128 characters of [A-Za-z0-9_-]", c.ID)
	}
	if c.Wait {
		if err := positive("wait-timeout", c.WaitTimeout); err != nil {
			return err
		}
	}
	data, err := json.Marshal(events.Cancel{V: events.Version, ID: c.ID, Reason: c.Reason})
	if err != nil {
		return err
	}
	if _, err := events.DecodeCancel(data); err != nil {
		return flagError(err)
	}
	return c.with(func(ctx context.Context, cl *client.Client) error {
		j, err := cl.Get(ctx, c.ID)
		if errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("no job %s (pollux get %s tells more)", c.ID, c.ID)
		}
		if err != nil {
			return err
		}
		if j.State.Terminal() {
			return fmt.Errorf("job %s has ended already: %s", c.ID, j.State)
		}
		job := client.Job{Route: j.Route, ID: j.ID}
		if err := cl.Cancel(ctx, job, c.Reason); err != nil {
			return err
		}
		fmt.Fprintf(g.Stdout, "cancel of job %s requested (route %s)\n", job.ID, job.Route)
		if !c.Wait {
			return nil
		}
		err = waitJob(ctx, cl, job, c.WaitTimeout, g)
		var ended *endedError
		if errors.As(err, &ended) && ended.state == state.Canceled {
			return nil // what was asked for
		}
		return err
	})
}

// with runs fn with a client of the connection, until interrupted.
func (c Connection) with(fn func(context.Context, *client.Client) error) error {
	ctx, stop := signalContext()
	defer stop()
	nc, _, _, err := c.open()
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, err := client.New(nc, client.WithPrefix(c.Prefix))
	if err != nil {
		return err
	}
	return fn(ctx, cl)
}

// waitJob prints job's events until its end: nil when it succeeded.
func waitJob(ctx context.Context, cl *client.Client, job client.Job, timeout time.Duration, g *Globals) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for ev, err := range cl.Events(ctx, job) {
		if ev != nil {
			fmt.Fprintln(g.Stdout, eventLine(ev))
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("gave up waiting for job %s after %s (--wait-timeout); it goes on: pollux get %s", job.ID, timeout, job.ID)
			}
			return err
		}
		if ev.State.Terminal() {
			return waitResult(job.ID, ev)
		}
	}
	return ctx.Err()
}
