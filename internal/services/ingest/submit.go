package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// submit handles a submission: dedupe, submit once, arm the check.
func (s *Service) submit(ctx context.Context, in intake) (events.Outcome, string) {
	data := in.msg.Data()
	m, err := events.DecodeSubmit(data)
	if err != nil {
		return s.reject(ctx, in, rejectionID(in.kind, in.routeName, data, in.seq, in.stored), err)
	}
	id := jobID(in.route.Name, m, in.seq, in.stored)
	if m.HedgeOf != "" {
		return s.submitHedge(ctx, in, m, id)
	}
	return s.submitJob(ctx, in, m, id, nil)
}

// submitJob submits job id of submission m on in's route; routing is how
// a model route chose the route (nil for a submission to it). Its first
// step (first) leads into the pipeline (pipeline.go).
func (s *Service) submitJob(ctx context.Context, in intake, m *events.Submit, id string, routing *state.Routing) (events.Outcome, string) {
	log := in.logger(s.log, id)
	return s.exclusively(id, func() (events.Outcome, string) {
		return s.drive(ctx, in, s.first(ctx, in, m, id, routing, log), log)
	})
}

// first is a submission's first step: it builds its job, validated, and
// moves to the submit step (attempt.go) with it unstored — the record is
// created with the first attempt marked, right before the call, so a
// first delivery costs one write. A redelivery, or a submission whose
// deadline passed while it waited in the intake, is stored (most often
// it is already: waiting, in doubt, created) and taken from where its
// record stands.
func (s *Service) first(ctx context.Context, in intake, m *events.Submit, id string, routing *state.Routing, log zerolog.Logger) move {
	now := s.cfg.Now().UTC()
	r := in.route
	// A relative deadline counts from the submission's acceptance, not
	// from this delivery: a submission that waited has waited its time.
	dl, err := deadline(r, m.Deadline, m.TimeoutS, in.stored)
	if err != nil {
		return end(s.reject(ctx, in, id, err))
	}
	if err := s.knownApp(m.App); err != nil {
		return end(s.reject(ctx, in, id, err))
	}
	if m.NotifyURL != "" && !s.cfg.NotifyURLs {
		return end(s.reject(ctx, in, id, &events.FieldError{Field: "notify_url",
			Problem: "this deployment does not call submissions' own endpoints (notify.submissions is not configured)"}))
	}
	j := &state.Job{
		ID: id, Route: r.Name, Model: m.Model, ConfigKey: r.ConfigKey(m.ConfigKey, m.Input), Length: r.Length(m.Input), State: state.Pending,
		NotifyURL: m.NotifyURL, KeepInput: r.KeepInputs,
		Input: m.Input, Metadata: m.Metadata, IdempotencyKey: cmp.Or(m.IdempotencyKey, id), IntakeSeq: in.seq,
		CreatedAt: now, Deadline: dl,
		ExpectedDuration: state.Duration(m.ExpectedDurationS * float64(time.Second)),
		WebhookExpected:  r.WebhookURL != "" && (m.Webhook == nil || *m.Webhook),
		Routing:          routing,
		SubmittedBy:      m.By, SubmitReason: m.Reason, ResubmitOf: m.ResubmitOf, App: m.App,
	}
	// Its estimate against its app's budget, once per job: the front
	// door admitted a create it answered already, and a redelivery or a
	// duplicate finds the job admitted.
	if err := s.cfg.Spend.Admit(ctx, j); spend.Refusal(err) != nil {
		return end(s.reject(ctx, in, id, err))
	} else if err != nil {
		return end(s.retry(log, err, "admitting the job's spend"))
	}
	if in.attempt > 1 || !now.Before(dl) {
		// A redelivery: its record says what is next. One whose deadline
		// passed while it waited expires without a create (attempt).
		return s.store(ctx, j, log)
	}
	return move{to: stepSubmit, fresh: j}
}

// store stores a submission's job without a submit attempt, and takes it
// from there as a redelivery would.
func (s *Service) store(ctx context.Context, j *state.Job, log zerolog.Logger) move {
	rec, _, err := s.jobs.Accept(ctx, j)
	if err != nil {
		return end(s.retry(log, err, "creating the job"))
	}
	return decided(rec)
}

// enqueue is the wait step: the job waits for a running slot in the
// admission queue (queue.go). It is stored waiting first when it is not
// yet (fresh: a first delivery that found the slots taken, or others
// queued before it), so that it can be seen, and canceled, while it
// waits; then its admission ticket is published, and the intake message
// is done. A job the queue itself started just goes back to it.
func (s *Service) enqueue(ctx context.Context, in intake, m move, log zerolog.Logger) move {
	r := in.route
	if in.queued {
		return end(events.Later(slotWait), "waiting")
	}
	j := m.rec.Job
	if m.fresh != nil {
		rec, created, err := s.jobs.Accept(ctx, m.fresh)
		if err != nil {
			return end(s.retry(log, err, "creating the job"))
		}
		if !created && nextStep(rec.Job, in.routeName, in.seq) != stepSubmit {
			return decided(rec) // moved on meanwhile
		}
		j = m.fresh
	}
	b, err := json.Marshal(events.Ticket{V: events.Version, JobID: j.ID, Route: r.Name})
	if err != nil {
		return end(s.retry(log, err, "encoding the admission ticket"))
	}
	q := s.queues[r.Queue()]
	if _, err := s.js.Publish(ctx, s.ns.Waiting(q.name, r.Tenant(j)), b, jetstream.WithMsgID(events.TicketID(j.ID, j.AttemptID))); err != nil {
		return end(s.retry(log, err, "queueing the job for a running slot"))
	}
	q.queued()
	if s.cfg.Metrics.Waiting != nil {
		s.cfg.Metrics.Waiting(cmp.Or(j.WaitingFor, "queue "+q.name))
	}
	log.Debug().Str(logkey.WaitingFor, j.WaitingFor).Msg("waiting for a running slot")
	return end(events.Done(), "waiting")
}

// slotWait is how long a job the admission queue tried to start, and that
// found a level full, waits before it is tried again.
const slotWait = time.Second

// knownApp refuses an app the configuration does not name, when it names
// any: a publisher's typo would otherwise make jobs no token sees and
// spend no budget holds.
func (s *Service) knownApp(app string) error {
	if app == "" || len(s.cfg.Apps) == 0 || slices.Contains(s.cfg.Apps, app) {
		return nil
	}
	return &events.FieldError{Field: "app", Problem: fmt.Sprintf("%q is not one of the configured apps", app)}
}
