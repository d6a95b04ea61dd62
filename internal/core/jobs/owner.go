package jobs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Hooks observe what the owner does; nil fields are ignored. Hooks must not
// block.
type Hooks struct {
	// Published is called for every event published.
	Published func(route, typ string)
	// Terminal is called once for each job that became terminal, with its
	// final record (its polls final too), in the process that finished it.
	Terminal func(j *state.Job)
	// LatePolls is called for polls counted into a job after its Terminal
	// call: a poll that was under way when a webhook or a cancel ended the
	// job. With Terminal's j.Polls they sum to every status call of the
	// jobs that finished.
	LatePolls func(route string, n int)
}

// Config configures an Owner. Zero values mean the defaults on each field.
type Config struct {
	// Options are the streams' options (the events stream's MaxAge bounds
	// which unpublished events are published again).
	Options events.Options
	// Logger receives the owner's log lines (default: none).
	Logger zerolog.Logger
	// Hooks observe the owner.
	Hooks Hooks
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Seed seeds the jitter of retries (default: random).
	Seed uint64
	// Slots frees the running slots of jobs that end (nil: no route caps
	// its running jobs).
	Slots Releaser
	// Tracer makes the spans of the jobs' lives (nil, the default:
	// tracing off). The services start theirs with it too (Owner.Tracer).
	Tracer *tracing.Tracer
}

// Releaser frees a job's running slots (budget.Releaser). Freeing a slot
// twice does nothing.
type Releaser interface {
	Release(ctx context.Context, id string, slots []state.Slot) error
}

// Owner is the one owner of every job: see the package documentation.
type Owner struct {
	ns     events.Namespace
	js     jetstream.JetStream
	res    *events.Resources
	store  *records
	log    zerolog.Logger
	hooks  Hooks
	now    func() time.Time
	rnd    *rand.Rand
	maxAge time.Duration
	tracer *tracing.Tracer
	// parkAfter is events.Options.ParkAfter (0: never park).
	parkAfter time.Duration
}

// New returns the owner of the namespace's jobs, over its streams and
// buckets.
func New(ns events.Namespace, js jetstream.JetStream, res *events.Resources, cfg Config) *Owner {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	o := &Owner{
		ns: ns, js: js, res: res, log: cfg.Logger, hooks: cfg.Hooks, now: now,
		store:  &records{kv: res.Jobs, js: js, now: now},
		rnd:    schedule.NewRand(cfg.Seed),
		maxAge: cfg.Options.WithDefaults().EventsMaxAge,
		tracer: cfg.Tracer,
	}
	if pa := cfg.Options.WithDefaults().ParkAfter; pa > 0 {
		o.parkAfter = max(pa, events.MinParkAfter)
		if res.Checks != nil && !res.Checks.CachedInfo().Config.AllowMsgSchedules {
			// A server before 2.12 keeps a schedule as a plain message
			// that never fires: a parked check would be a lost job.
			o.log.Warn().Str(logkey.Stream, res.Checks.CachedInfo().Config.Name).
				Msg("the checks stream does not allow message schedules (nats-server 2.12 or later does): checks are not parked")
			o.parkAfter = 0
		}
	}
	if cfg.Slots != nil {
		o.store.release = func(ctx context.Context, id string, slots []state.Slot) {
			// The end is written: a stop does not keep the slots taken.
			if err := cfg.Slots.Release(context.WithoutCancel(ctx), id, slots); err != nil {
				o.log.Warn().Err(err).Str(logkey.JobID, id).Msg("freeing the ended job's running slots failed; the repair frees them")
			}
		}
	}
	return o
}

// Tracer returns the tracer of the jobs' spans (nil: tracing off). A job's
// trace context is in its record, which the owner keeps, so the services
// that touch a job start their spans in its trace with the owner's
// tracer: one setting (Config.Tracer) traces the whole process.
func (o *Owner) Tracer() *tracing.Tracer {
	if o == nil {
		return nil
	}
	return o.tracer
}

// finished calls the Terminal hook when a write took the job from
// unfinished (or unsettled) to terminal with its polls final.
func (o *Owner) finished(was *state.Job, now *state.Job) {
	if !now.State.Terminal() || now.PollsOpen {
		return
	}
	if was != nil && was.State.Terminal() && !was.PollsOpen {
		// Final before this write: only polls can come in late.
		if n := now.Polls - was.Polls; n > 0 && o.hooks.LatePolls != nil {
			o.hooks.LatePolls(now.Route, n)
		}
		return
	}
	if o.hooks.Terminal != nil {
		o.hooks.Terminal(now)
	}
}

// keepRetrying runs fn until it succeeds or ctx ends, waiting a growing,
// jittered delay between attempts (100 ms up to 5 s). It is how the owner
// keeps a result the provider gave: a failure of NATS, however long, only
// delays it. Failures are logged with the job's fields, the first at once
// and then about every 30 s.
func (o *Owner) keepRetrying(ctx context.Context, log zerolog.Logger, what string, fn func(context.Context) error) error {
	backoff := schedule.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}
	var lastLog time.Time
	for n := 1; ; n++ {
		err := fn(ctx)
		if err == nil {
			if n > 1 {
				log.Info().Int(logkey.Attempts, n).Msg(what + ": done after retrying")
			}
			return nil
		}
		if errors.Is(err, errPermanent) || ctx.Err() != nil {
			return err
		}
		if time.Since(lastLog) > 30*time.Second {
			log.Warn().Err(err).Int(logkey.Attempt, n).Msg(what + " failed; retrying until it succeeds")
			lastLog = time.Now()
		}
		if !schedule.Sleep(ctx, backoff.Next(n, o.rnd)) {
			return fmt.Errorf("%s: %w (last failure: %w)", what, ctx.Err(), err)
		}
	}
}

// errPermanent marks a failure retrying cannot mend.
var errPermanent = errors.New("permanent")
