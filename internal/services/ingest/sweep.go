package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// sweep periodically rejects intake published to routes that no process
// serves, so a typo in a route name is answered instead of waiting forever.
// A route that some other process serves has a consumer, which makes the
// sweeper's consumer creation fail; such subjects are left alone.
func (s *Service) sweep(ctx context.Context) error {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.sweepOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("sweeping unserved intake failed")
		}
	}
}

func (s *Service) sweepOnce(ctx context.Context) error {
	info, err := s.res.Intake.Info(ctx, jetstream.WithSubjectFilter(s.ns.Prefix()+".*.*"))
	if err != nil {
		return fmt.Errorf("intake subjects: %w", err)
	}
	for subject, n := range info.State.Subjects {
		kind, routeName, err := s.ns.ParseIntake(subject)
		if err != nil || n == 0 {
			continue
		}
		if _, served := s.cfg.Routes[routeName]; served {
			continue
		}
		if _, served := s.models[routeName]; served {
			continue
		}
		if err := s.rejectUnserved(ctx, subject, kind, routeName); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) rejectUnserved(ctx context.Context, subject, kind, routeName string) error {
	c, err := s.res.Intake.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject:     subject,
		AckPolicy:         jetstream.AckExplicitPolicy,
		InactiveThreshold: 30 * time.Second,
	})
	if events.IsAPIError(err, events.CodeConsumerNotUnique) {
		return nil // another process serves the route: its consumer overlaps
	}
	if err != nil {
		return fmt.Errorf("consumer for unserved %s: %w", subject, err)
	}
	defer func() {
		_ = s.res.Intake.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name)
	}()
	batch, err := c.Fetch(100, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return err
	}
	problem := fmt.Errorf("route: no route named %q is configured", routeName)
	if !events.ValidToken(routeName) {
		problem = fmt.Errorf("route: %q is not a valid route name ([A-Za-z0-9_-], at most 128 bytes)", routeName)
	}
	for msg := range batch.Messages() {
		md, err := msg.Metadata()
		if err != nil {
			_ = msg.Term()
			continue
		}
		in := intake{kind: kind, routeName: routeName, msg: msg, seq: md.Sequence.Stream, stored: md.Timestamp, attempt: md.NumDelivered}
		out, result := s.reject(ctx, in, rejectionID(kind, routeName, msg.Data(), in.seq, in.stored), problem)
		if err := out.Settle(msg); err != nil {
			s.log.Warn().Err(err).Msg("settling an unserved intake message failed")
		}
		if s.cfg.Metrics.Submission != nil {
			s.cfg.Metrics.Submission("_unserved", kind, result) // bounded label: the name is user input
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// repair frees, every route.RepairInterval (jittered), the running slots
// of this process's routes that no job holds: the slots of jobs whose end
// was written by a process that died before freeing them, and of takes
// whose record never landed (route.Gates.Repair). It also sweeps the
// admission queues (jobs whose deadline passed while they waited expire).
// Every process does it; it is idempotent.
func (s *Service) repair(ctx context.Context) error {
	if !s.gates.Caps() {
		return nil
	}
	for {
		if !schedule.Sleep(ctx, schedule.Jitter(s.cfg.RepairInterval, schedule.RetryJitter, s.rnd)) {
			return nil
		}
		for _, q := range s.queues {
			if _, err := s.sweepQueue(ctx, q); err != nil && ctx.Err() == nil {
				s.log.Warn().Err(err).Str(logkey.Queue, q.name).Msg("sweeping the admission queue failed")
			}
		}
		for _, r := range s.gates.Repair(ctx, s.jobs.Get, s.cfg.Now(), s.cfg.RepairGrace) {
			if r.Freed > 0 {
				s.log.Warn().Str(logkey.Level, r.Level).Int(logkey.Freed, r.Freed).
					Msg("freed running slots no job holds (a process died between a job's end and freeing its slot)")
				if s.cfg.Metrics.Repaired != nil {
					s.cfg.Metrics.Repaired(r.Level, r.Freed)
				}
			}
			if r.Err != nil && ctx.Err() == nil {
				s.log.Warn().Err(r.Err).Str(logkey.Level, r.Level).Msg("repairing running slots failed")
			}
		}
	}
}
