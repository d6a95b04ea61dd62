package poller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Hedging. A job a model route with hedge: true chose a member for is
// watched at every poll: when its learned distribution gives it less than
// the route's hedge_below chance to end by its deadline, given that it has
// not ended yet, and another member (not paused) is expected to do better,
// the poll marks the job hedged (state.Routing.HedgedBy, in the same write
// as the poll) and then submits the hedge — the same input, deadline and
// metadata, the member's model, events.Submit.HedgeOf naming the job — to
// that member's intake. The mark comes first, so a job is hedged at most
// once, and a process dying before the submission leaves a mark that the
// next poll finds without a hedge record and submits again (one id: one
// job).
//
// The first to succeed wins. A hedged job's poll reads its hedge: when the
// hedge succeeded, the job ends succeeded with the hedge's outputs
// (detected_by "hedge"), and its own provider job is canceled where the
// adapter can cancel. A hedge's poll reads the job it hedges: when that
// ended, whatever its state, the hedge is canceled through the intake. A
// hedge that fails changes nothing: the job goes on. So the job the client
// submitted ends once, and no route has the job twice.

// hedgeID is the id of job id's hedge.
func hedgeID(id string) string {
	if len(id) <= 126 {
		return id + "-h"
	}
	h := sha256.Sum256([]byte(id))
	return "hedge-" + hex.EncodeToString(h[:16])
}

// hedgeSettle is what a routed job's poll learned of its hedge, or of the
// job it hedges, before the status call.
type hedgeSettle struct {
	// won is the hedge, when it succeeded: the job adopts its result.
	won *state.Job
}

// settleHedges reads, for a job in a hedge, the other job, and acts on it:
// a missing hedge is submitted again, a hedge whose job ended is
// canceled. A failure to read is logged and the poll goes on.
func (s *Service) settleHedges(ctx context.Context, r *route.Route, d *hedgeView, log *zerolog.Logger) hedgeSettle {
	switch {
	case d.live.HedgedBy != "":
		h, err := s.jobs.Get(ctx, d.live.HedgedBy)
		switch {
		case errors.Is(err, state.ErrNotFound):
			s.submitHedge(ctx, d.id, log)
		case err != nil:
			log.Warn().Err(err).Str(logkey.Hedge, d.live.HedgedBy).Msg("reading the job's hedge failed")
		case h.State == state.Succeeded:
			return hedgeSettle{won: h}
		}
	case d.live.HedgeOf != "":
		orig, err := s.jobs.Get(ctx, d.live.HedgeOf)
		switch {
		case err != nil && !errors.Is(err, state.ErrNotFound):
			log.Warn().Err(err).Str(logkey.HedgeOf, d.live.HedgeOf).Msg("reading the hedged job failed")
		case err != nil || orig.State.Terminal():
			what := "is gone"
			if err == nil {
				what = "ended " + string(orig.State)
			}
			s.cancelThrough(ctx, r.Name, d.id, fmt.Sprintf("the job it hedged, %s, %s", d.live.HedgeOf, what), log)
		}
	}
	return hedgeSettle{}
}

// hedgeView is what settleHedges needs of a delivery.
type hedgeView struct {
	id   string
	live *events.PollState
}

// adopt is the observation that ends a hedged job with its hedge's result.
func adopt(h *state.Job, now time.Time) *state.Observation {
	return &state.Observation{State: state.Succeeded, Outputs: h.Outputs, OutputsExpireAt: h.OutputsExpireAt,
		CompletedAt: h.CompletedAt, Source: state.FromHedge, At: now,
		Reason: fmt.Sprintf("its hedge %s on route %s succeeded first", h.ID, h.Route)}
}

// hedgeTo decides whether a job that goes on after a poll at now should be
// hedged, and where: a member of its model route other than r, not paused,
// expected to end it by its deadline more likely than r now is.
func (s *Service) hedgeTo(r *route.Route, id string, after *events.PollState, now time.Time) (route.Member, bool) {
	mr := s.cfg.ModelRoutes[after.Via]
	if mr == nil || !mr.Hedge || after.HedgeOf != "" || after.HedgedBy != "" || after.Deadline.IsZero() || s.cfg.Learned == nil {
		return route.Member{}, false
	}
	start := after.SubmittedAt
	if start.IsZero() || !now.Before(after.Deadline) {
		return route.Member{}, false
	}
	total, _ := s.cfg.Learned.Lookup(r.Name, after.Model, after.ConfigKey, after.Length)
	if total == nil || total.Weight() < schedule.DefaultMinSamples {
		return route.Member{}, false
	}
	onTime := 0.0 // outlived what was learned: it will not be on time
	if left := total.Survival(now.Sub(start)); left > 0 {
		onTime = 1 - total.Survival(after.Deadline.Sub(start))/left
	}
	if onTime >= mr.HedgeBelow {
		return route.Member{}, false
	}
	states := make([]route.MemberState, len(mr.Members))
	for i, m := range mr.Members {
		states[i].Paused = s.pauses.Hold(m.Route) > 0
	}
	ch := mr.Choose(hedgeID(id), after.ConfigKey, after.Length, now, after.Deadline, 0, s.cfg.Learned, states)
	for i, m := range ch.Ranked {
		c := ch.Routing.Candidates[i]
		if m.Route.Name == r.Name || c.Paused {
			continue
		}
		if c.OnTime != nil && *c.OnTime <= onTime {
			return route.Member{}, false // no member does better
		}
		return m, true
	}
	return route.Member{}, false
}

// submitHedge submits the hedge of job id, marked hedged, to the member
// its mark names: the record's input, deadline and metadata. Best effort:
// a failure is logged, and the next poll, finding no hedge, submits again.
func (s *Service) submitHedge(ctx context.Context, id string, log *zerolog.Logger) {
	j, err := s.jobs.Get(ctx, id)
	if err != nil || j.Routing == nil || j.Routing.HedgedBy == "" || j.State.Terminal() {
		return
	}
	mr := s.cfg.ModelRoutes[j.Routing.Via]
	if mr == nil {
		return
	}
	member, ok := mr.Member(j.Routing.HedgeTo)
	if !ok {
		log.Warn().Str(logkey.HedgeTo, j.Routing.HedgeTo).Msg("the hedge's route is no longer a member of the model route; not hedged")
		return
	}
	m := events.Submit{V: events.Version, ID: j.Routing.HedgedBy, Model: member.Model, Input: j.Input,
		Deadline: j.Deadline, ExpectedDurationS: time.Duration(j.ExpectedDuration).Seconds(), ConfigKey: j.ConfigKey,
		Metadata: j.Metadata, HedgeOf: j.ID}
	b, err := json.Marshal(m)
	if err == nil {
		msg := &nats.Msg{Subject: s.ns.Submit(member.Route.Name), Data: b}
		if t := s.jobs.Tracer(); t != nil {
			// The hedge's intake, and so its trace, is the poll's child.
			msg.Header = nats.Header{}
			t.Inject(ctx, msg.Header)
		}
		_, err = s.js.PublishMsg(ctx, msg, jetstream.WithMsgID("hedge-"+m.ID))
	}
	if err != nil {
		log.Warn().Err(err).Str(logkey.Hedge, m.ID).Msg("submitting the hedge failed; the next poll retries")
		return
	}
	log.Info().Str(logkey.Hedge, m.ID).Str(logkey.HedgeRoute, member.Route.Name).Msg("hedged: likely to miss its deadline here")
}

// cancelThrough asks for job id's cancel on its route's intake, as a
// client would. Best effort: the next poll asks again.
func (s *Service) cancelThrough(ctx context.Context, routeName, id, reason string, log *zerolog.Logger) {
	b, err := json.Marshal(events.Cancel{V: events.Version, ID: id, Reason: reason})
	if err == nil {
		_, err = s.js.Publish(ctx, s.ns.Cancel(routeName), b)
	}
	if err != nil {
		log.Warn().Err(err).Msg("asking for the hedge's cancel failed; the next poll asks again")
	}
}
