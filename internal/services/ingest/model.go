package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Model routes. A submission to a model route is routed, once, to the
// member route.ModelRoute.Choose ranks first, and from then on it is that
// route's job: its id (derived with the model route's name when the
// submission gives none), its record on the member with the choice and
// why (state.Job.Routing), its events on the member's subjects
// (events.<member>.<id>; clients watch events.*.<id>). A redelivery, or a
// duplicate submission, finds the record and follows the choice made:
// a job is never created on two routes, nor twice on one; a job that
// ended where no member runs it (the front door withdrew a create it
// answered 503, jobs.Owner.Withdraw) makes nothing. A cancel sent to the
// model route goes to the member the job is on.

// servedModels returns the model routes whose members this process all
// serves.
func (s *Service) servedModels() map[string]*route.ModelRoute {
	out := map[string]*route.ModelRoute{}
	for name, mr := range s.cfg.ModelRoutes {
		all := true
		for _, m := range mr.Members {
			if _, ok := s.cfg.Routes[m.Route.Name]; !ok {
				all = false
			}
		}
		if all {
			out[name] = mr
		} else {
			s.log.Warn().Str(logkey.ModelRoute, name).Msg("not serving the model route: this process does not serve all of its members")
		}
	}
	return out
}

// handleModel dispatches one intake message of a model route.
func (s *Service) handleModel(ctx context.Context, mr *route.ModelRoute, msg jetstream.Msg) events.Outcome {
	return s.dispatch(ctx, msg, intake{routeName: mr.Name, via: mr.Name}, func(ctx context.Context, in intake) (events.Outcome, string) {
		switch in.kind {
		case events.KindSubmit:
			return s.submitModel(ctx, mr, in)
		case events.KindTrack:
			return s.reject(ctx, in, rejectionID(in.kind, in.routeName, in.msg.Data(), in.seq, in.stored),
				&events.FieldError{Field: "route", Problem: fmt.Sprintf("%s is a model route: track the job on the route it was submitted to", mr.Name)})
		}
		return s.cancelModel(ctx, mr, in)
	})
}

// submitModel routes a submission to a member and submits it there.
func (s *Service) submitModel(ctx context.Context, mr *route.ModelRoute, in intake) (events.Outcome, string) {
	data := in.msg.Data()
	m, err := events.DecodeSubmit(data)
	if err != nil {
		return s.reject(ctx, in, rejectionID(in.kind, in.routeName, data, in.seq, in.stored), err)
	}
	id := jobID(mr.Name, m, in.seq, in.stored)
	log := in.logger(s.log, id)
	j, err := s.jobs.Get(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		ch := s.choose(mr, id, m, in)
		member := ch.Ranked[0]
		in.route, in.routeName, m.Model = member.Route, member.Route.Name, member.Model
		log.Info().Str(logkey.ModelRoute, mr.Name).Str(logkey.Chose, member.Route.Name).Str(logkey.Why, ch.Routing.Why).Msg("routed")
		return s.submitJob(ctx, in, m, id, &ch.Routing)
	case err != nil:
		return s.retry(log, err, "reading the job")
	case j.Routing == nil || j.Routing.Via != mr.Name:
		return s.reject(ctx, in, id, &events.FieldError{Field: "id", Problem: fmt.Sprintf("already used by a job on route %s", j.Route)})
	}
	// Routed before (a redelivery, or a duplicate submission): where it went.
	member, ok := mr.Member(j.Route)
	switch {
	case !ok && j.State.Terminal():
		// Ended where no member runs it (the front door withdrew it:
		// jobs.Owner.Withdraw): nothing to do.
		log.Debug().Str(logkey.ModelRoute, mr.Name).Msg("duplicate submission; the job has ended")
		return events.Done(), "duplicate"
	case !ok:
		return s.reject(ctx, in, id, fmt.Errorf("route: the job went to %s, no longer a member of model route %s", j.Route, mr.Name))
	}
	in.route, in.routeName, m.Model = member.Route, member.Route.Name, member.Model
	return s.submitJob(ctx, in, m, id, j.Routing)
}

// choose ranks mr's members for submission m.
func (s *Service) choose(mr *route.ModelRoute, id string, m *events.Submit, in intake) route.Choice {
	now := s.cfg.Now().UTC()
	states := make([]route.MemberState, len(mr.Members))
	for i, mb := range mr.Members {
		states[i].Paused = s.gates.Pauses().Hold(mb.Route) > 0
		if q := s.queues[mb.Route.Queue()]; q != nil && q.busy() {
			states[i].Waiting = true
		}
	}
	// The deadline as the first member would set it; each member's own
	// is set when the job is submitted there.
	r := mr.Members[0].Route
	dl, err := deadline(r, m.Deadline, m.TimeoutS, in.stored)
	if err != nil {
		dl = in.stored.Add(r.Deadline)
	}
	configKey := r.ConfigKey(m.ConfigKey, m.Input)
	return mr.Choose(id, configKey, r.Length(m.Input), now, dl, time.Duration(m.ExpectedDurationS*float64(time.Second)), s.cfg.Learned, states)
}

// cancelModel hands a cancel sent to a model route to the member its job
// is on.
func (s *Service) cancelModel(ctx context.Context, mr *route.ModelRoute, in intake) (events.Outcome, string) {
	data := in.msg.Data()
	m, err := events.DecodeCancel(data)
	if err != nil {
		return s.reject(ctx, in, rejectionID(in.kind, in.routeName, data, in.seq, in.stored), err)
	}
	j, err := s.jobs.Get(ctx, m.ID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return s.reject(ctx, in, m.ID, &events.FieldError{Field: "id", Problem: "no such job"})
	case err != nil:
		return s.retry(in.logger(s.log, m.ID), err, "reading the job")
	case j.Routing == nil || j.Routing.Via != mr.Name:
		return s.reject(ctx, in, m.ID, &events.FieldError{Field: "id", Problem: fmt.Sprintf("the job is on route %s, not %s", j.Route, mr.Name)})
	}
	member, ok := mr.Member(j.Route)
	if !ok {
		return s.reject(ctx, in, m.ID, fmt.Errorf("route: the job is on %s, no longer a member of model route %s", j.Route, mr.Name))
	}
	in.route, in.routeName = member.Route, member.Route.Name
	return s.cancel(ctx, in)
}

// submitHedge submits a hedge: a job that a poller, finding job
// m.HedgeOf likely to miss its deadline, sends to another member of its
// model route, after marking the hedged job with the hedge's id. Anything
// else claiming to hedge a job is rejected by name.
func (s *Service) submitHedge(ctx context.Context, in intake, m *events.Submit, id string) (events.Outcome, string) {
	orig, err := s.jobs.Get(ctx, m.HedgeOf)
	var problem string
	switch {
	case errors.Is(err, state.ErrNotFound):
		problem = "no such job"
	case err != nil:
		return s.retry(in.logger(s.log, id), err, "reading the hedged job")
	case orig.Routing == nil || orig.Routing.HedgedBy != id:
		problem = fmt.Sprintf("job %s is not hedged by %s", orig.ID, id)
	case s.cfg.ModelRoutes[orig.Routing.Via] == nil:
		problem = fmt.Sprintf("job %s's model route %s is not configured", orig.ID, orig.Routing.Via)
	}
	if problem == "" {
		if _, ok := s.cfg.ModelRoutes[orig.Routing.Via].Member(in.routeName); !ok || orig.Route == in.routeName {
			problem = fmt.Sprintf("route %s is not another member of model route %s", in.routeName, orig.Routing.Via)
		}
	}
	if problem != "" {
		return s.reject(ctx, in, id, &events.FieldError{Field: "hedge_of", Problem: problem})
	}
	routing := &state.Routing{Via: orig.Routing.Via, HedgeOf: orig.ID, Candidates: []state.Candidate{},
		Why: fmt.Sprintf("%s: hedge of job %s on %s, likely to miss its deadline there", in.routeName, orig.ID, orig.Route)}
	return s.submitJob(ctx, in, m, id, routing)
}
