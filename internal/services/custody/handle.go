package custody

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// heartbeat is how often a job's copy under way tells the server it is
// still at it (the work consumer's ack wait is twice that).
const heartbeat = 30 * time.Second

// handle takes one job of the work queue: copies its outputs where its
// route keeps them, records what was kept, and then watches their expiry.
func (s *Service) handle(ctx context.Context, msg jetstream.Msg) events.Outcome {
	md, err := msg.Metadata()
	if err != nil {
		return events.Stop()
	}
	ev, err := events.DecodeEvent(msg.Data())
	if err != nil || ev.JobID == "" {
		s.log.Error().Err(err).Msg("dropping an unreadable custody message")
		return events.Stop()
	}
	log := s.log.With().Str(logkey.JobID, ev.JobID).Str(logkey.Route, ev.Route).Logger()
	j, err := s.owner.Get(ctx, ev.JobID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return events.Done() // aged out of the jobs bucket
	case err != nil:
		log.Warn().Err(err).Msg("reading a job for custody failed; retrying")
		return events.Later(s.jitter(2 * time.Second))
	case j.State != state.Succeeded:
		return events.Done()
	}
	if keep, ok := s.cfg.Routes[j.Route]; ok && (j.Custody == nil || j.Custody.SavedAt.IsZero()) {
		stop := s.inProgress(msg)
		out, done := s.keep(ctx, log, j, keep, md)
		stop()
		if !done {
			return out.Outcome
		}
		if j, err = s.record(ctx, log, j, out.saved); err != nil {
			if errors.Is(err, state.ErrNotFound) || errors.Is(err, jobs.ErrNotSucceeded) {
				return events.Done()
			}
			log.Warn().Err(err).Msg("recording a job's outputs failed; retrying")
			return events.Later(s.jitter(2 * time.Second))
		}
	}
	return s.watch(ctx, log, j)
}

// inProgress tells the server every heartbeat that msg is being worked
// on, until the returned func is called.
func (s *Service) inProgress(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// kept is what a pass over a job's outputs came to.
type kept struct {
	events.Outcome
	saved []state.SavedOutput
}

// keep makes one pass over a job's outputs: each is found in the bucket
// or downloaded. done reports that every output has its outcome; else
// the outcome says when to try again.
func (s *Service) keep(ctx context.Context, log zerolog.Logger, j *state.Job, k config.KeepOutputs, md *jetstream.MsgMetadata) (kept, bool) {
	now := s.cfg.Now()
	// Retried until the outputs expire, else for the route's horizon from
	// when the job was queued here; at least once either way.
	deadline := md.Timestamp.Add(k.Horizon)
	if !j.OutputsExpireAt.IsZero() {
		deadline = j.OutputsExpireAt
	}
	last := !now.Before(deadline)
	attempt := int(md.NumDelivered)
	saved := make([]state.SavedOutput, len(j.Outputs))
	retry := false
	for i, url := range j.Outputs {
		r := s.output(ctx, j, i, url, k, attempt)
		if ctx.Err() != nil {
			return kept{Outcome: events.Later(time.Second)}, false // stopping: this pass does not count
		}
		if r.Status == "" { // failed this time
			if !last {
				retry = true
				s.count(j.Route, "retried")
				log.Info().Int(logkey.Output, i).Str(logkey.Reason, r.Reason).Int(logkey.Attempt, attempt).Msg("copying an output failed; retrying")
				continue
			}
			r.Status = state.OutputFailed
			r.Reason = fmt.Sprintf("given up at %s after %d attempts: %s", deadline.UTC().Format(time.RFC3339), attempt, r.Reason)
		}
		saved[i] = r
	}
	if retry {
		s.warnIfDue(ctx, log, j, now)
		delay := schedule.Backoff{Base: s.cfg.RetryBase, Max: 30 * time.Minute}.Next(attempt, s.rnd)
		// The last try at the deadline, not a backoff past it.
		delay = min(delay, max(deadline.Sub(now), 0))
		return kept{Outcome: events.Later(delay)}, false
	}
	return kept{saved: saved}, true
}

// record writes what was kept into the job's record (outputs_saved).
func (s *Service) record(ctx context.Context, log zerolog.Logger, j *state.Job, saved []state.SavedOutput) (*state.Job, error) {
	after, err := s.owner.SaveOutputs(ctx, j.ID, saved)
	if err != nil {
		return nil, err
	}
	var n int64
	for _, o := range saved {
		s.count(j.Route, o.Status)
		n += o.Size
		if o.Status != state.OutputSaved {
			log.Warn().Int(logkey.Output, o.Index).Str(logkey.Status, o.Status).Str(logkey.Reason, o.Reason).Msg("an output was not kept")
		}
	}
	if s.cfg.Metrics.Bytes != nil && n > 0 {
		s.cfg.Metrics.Bytes(j.Route, n)
	}
	log.Info().Int(logkey.Outputs, len(saved)).Int64(logkey.Bytes, n).Msg("outputs saved")
	return after, nil
}

// watch waits until a job's outputs are about to expire, and warns then
// (outputs_expiring) unless they are saved.
func (s *Service) watch(ctx context.Context, log zerolog.Logger, j *state.Job) events.Outcome {
	now := s.cfg.Now()
	switch {
	case j.OutputsExpireAt.IsZero(), !now.Before(j.OutputsExpireAt), !j.OutputsUnsaved():
		return events.Done()
	case j.Custody != nil && !j.Custody.ExpiringAt.IsZero():
		return events.Done()
	}
	if at := j.OutputsExpireAt.Add(-s.cfg.ExpiringLead); now.Before(at) {
		return events.Later(at.Sub(now))
	}
	if !s.warn(ctx, log, j) {
		return events.Later(s.jitter(2 * time.Second))
	}
	return events.Done()
}

// warnIfDue warns about a job whose copy keeps failing once its outputs
// are about to expire.
func (s *Service) warnIfDue(ctx context.Context, log zerolog.Logger, j *state.Job, now time.Time) {
	if j.OutputsExpireAt.IsZero() || now.Before(j.OutputsExpireAt.Add(-s.cfg.ExpiringLead)) ||
		(j.Custody != nil && !j.Custody.ExpiringAt.IsZero()) {
		return
	}
	s.warn(ctx, log, j)
}

// warn emits a job's outputs_expiring; it reports whether that is done.
func (s *Service) warn(ctx context.Context, log zerolog.Logger, j *state.Job) bool {
	warned, err := s.owner.OutputsExpiring(ctx, j.ID)
	switch {
	case errors.Is(err, state.ErrNotFound), errors.Is(err, jobs.ErrNotSucceeded):
		return true
	case err != nil:
		log.Warn().Err(err).Msg("recording outputs_expiring failed; retrying")
		return false
	}
	if warned {
		_, kept := s.cfg.Routes[j.Route]
		if s.cfg.Metrics.Expiring != nil {
			s.cfg.Metrics.Expiring(j.Route, kept)
		}
		log.Warn().Time(logkey.OutputsExpireAt, j.OutputsExpireAt).Bool(logkey.Kept, kept).Msg("outputs expire soon, unsaved")
	}
	return true
}

func (s *Service) count(route, outcome string) {
	if s.cfg.Metrics.Output != nil {
		s.cfg.Metrics.Output(route, outcome)
	}
}
