package poller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/consume"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// A route's checks are split over Partitions durable consumers (see
// events.PartitionChecks). The count lives in the server, as the set of
// consumers: a poller starting with a count the server does not have
// replaces the route's consumers (repartition), and a running poller whose
// consumer is deleted under it adopts the set the server has then
// (follow). Replacing consumers loses no check: the messages stay in the
// work-queue stream, and the new consumers deliver each waiting check
// once at once, which (long past its not-before) waits a random part of
// one poll interval, so the route's polls are spread, not bunched. The
// quiet polls a check made under the old consumer are not counted in the
// job's polls (they were counted by that consumer's deliveries).

// followFor bounds how long a poller waits for another process to finish
// repartitioning before it sets its own count.
const followFor = 15 * time.Second

// runRoute consumes the route's partitions cs until ctx ends, following
// the server when they are replaced.
func (s *Service) runRoute(ctx context.Context, r *route.Route, cs []jetstream.Consumer) error {
	for {
		err := s.consumeAll(ctx, r, cs)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, consume.ErrConsumerGone) {
			return err
		}
		if cs, err = s.follow(ctx, r); err != nil {
			return err
		}
	}
}

// consumeAll consumes every partition until ctx ends or one of them is
// deleted (consume.ErrConsumerGone).
func (s *Service) consumeAll(ctx context.Context, r *route.Route, cs []jetstream.Consumer) error {
	g, gctx := errgroup.WithContext(ctx)
	// The route's status concurrency is per process, shared out over its
	// partitions.
	workers := max(1, (r.StatusWorkers+len(cs)-1)/len(cs))
	for _, c := range cs {
		g.Go(func() error {
			return consume.Run(gctx, c, consume.Options{
				Workers: workers,
				Hold:    func() time.Duration { return s.pauses.Hold(r) },
				Stream:  s.res.Checks,
				Sweep:   s.cfg.Sweep,
				Swept:   s.cfg.Metrics.Orphans,
				Logger:  s.log.With().Str(logkey.Route, r.Name).Str(logkey.Consumer, c.CachedInfo().Name).Logger(),
			}, func(ctx context.Context, msg jetstream.Msg) events.Outcome {
				return s.check(ctx, r, msg)
			})
		})
	}
	return g.Wait()
}

// partitionSets lists the route's poller consumers on the server by
// partition count.
func (s *Service) partitionSets(ctx context.Context, route string) (map[int][]string, error) {
	sets := map[int][]string{}
	names := s.res.Checks.ConsumerNames(ctx)
	for name := range names.Name() {
		if rt, _, parts, ok := s.ns.ParsePollerConsumer(name); ok && rt == route {
			sets[parts] = append(sets[parts], name)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("list the consumers of route %s's checks: %w", route, err)
	}
	return sets, nil
}

// repartition makes the route's partitions the configured count: it
// deletes the consumers of any other count and creates (or checks) its
// own.
func (s *Service) repartition(ctx context.Context, r *route.Route) ([]jetstream.Consumer, error) {
	want := r.Partitions
	sets, err := s.partitionSets(ctx, r.Name)
	if err != nil {
		return nil, err
	}
	for parts, names := range sets {
		if parts == want {
			continue
		}
		s.log.Warn().Str(logkey.Route, r.Name).Int(logkey.From, parts).Int(logkey.To, want).
			Msg("repartitioning the route's checks; pollers with the old count follow")
		for _, name := range names {
			if err := s.res.Checks.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return nil, fmt.Errorf("repartition route %s: delete consumer %s: %w", r.Name, name, err)
			}
		}
	}
	cs := make([]jetstream.Consumer, 0, want)
	for p := range want {
		c, err := events.EnsureConsumer(ctx, s.res.Checks, s.ns.PollerConsumerConfig(r.Name, p, want, s.cfg.Options))
		if events.IsAPIError(err, events.CodeConsumerNotUnique) {
			return nil, fmt.Errorf("route %s: another poller is setting a different partition count at the same time; give every poller the same `partitions`: %w", r.Name, err)
		}
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// follow returns the partitions the server has for the route once they are
// complete. It waits up to followFor for another process to finish
// repartitioning (between its deletes and creates the route may have no
// consumer at all), and then sets up the configured count itself: the
// consumers were deleted by hand, or their repartitioner died.
func (s *Service) follow(ctx context.Context, r *route.Route) ([]jetstream.Consumer, error) {
	deadline := time.Now().Add(followFor)
	for time.Now().Before(deadline) {
		sctx, cancel := context.WithTimeout(ctx, startupTimeout)
		cs, err := s.complete(sctx, r.Name)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			s.log.Warn().Err(err).Str(logkey.Route, r.Name).Msg("looking up the route's partitions failed; retrying")
		case cs != nil:
			s.log.Info().Str(logkey.Route, r.Name).Int(logkey.Partitions, len(cs)).Msg("following the route's partitions")
			return cs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	sctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	s.log.Warn().Str(logkey.Route, r.Name).Int(logkey.Partitions, r.Partitions).Msg("the route's partitions are gone or incomplete; setting them up")
	return s.repartition(sctx, r)
}

// complete returns the consumers of a complete partition set of the route,
// if the server has one.
func (s *Service) complete(ctx context.Context, route string) ([]jetstream.Consumer, error) {
	sets, err := s.partitionSets(ctx, route)
	if err != nil {
		return nil, err
	}
	for parts, names := range sets {
		if len(names) != parts {
			continue
		}
		cs := make([]jetstream.Consumer, parts)
		for p := range parts {
			c, err := s.res.Checks.Consumer(ctx, s.ns.PartitionConsumer(route, p, parts))
			if err != nil {
				return nil, err
			}
			cs[p] = c
		}
		return cs, nil
	}
	return nil, nil
}
