package ingest

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// track starts tracking a job submitted elsewhere.
func (s *Service) track(ctx context.Context, in intake) (events.Outcome, string) {
	now := s.cfg.Now().UTC()
	data := in.msg.Data()
	m, err := events.DecodeTrack(data)
	if err != nil {
		return s.reject(ctx, in, rejectionID(in.kind, in.routeName, data, in.seq, in.stored), err)
	}
	r := in.route
	id := cmp.Or(m.ID, events.AppRemoteKeyID(r.Name, m.App, m.RemoteID))
	dl, err := deadline(r, m.Deadline, m.TimeoutS, now)
	if err == nil {
		err = s.knownApp(m.App)
	}
	if err != nil {
		return s.reject(ctx, in, id, err)
	}
	j := &state.Job{
		ID: id, Route: r.Name, Model: m.Model, ConfigKey: m.ConfigKey, RemoteID: m.RemoteID,
		State: state.Queued, Metadata: m.Metadata, Tracked: true, IntakeSeq: in.seq, App: m.App,
		CreatedAt: now, SubmittedAt: now, ChangedAt: now, Deadline: dl,
		ExpectedDuration: state.Duration(m.ExpectedDurationS * float64(time.Second)),
		WebhookExpected:  r.WebhookURL != "" && m.Webhook != nil && *m.Webhook,
	}
	j.Record(events.EventSubmitted, now)
	j.NextCheckAt = now.Add(r.NextPoll(events.PollStateOf(j), now, route.Hints{}, s.cfg.Learned, s.rnd))
	log := in.logger(s.log, id).With().Str(logkey.RemoteID, m.RemoteID).Logger()

	rec, created, err := s.jobs.Accept(ctx, j)
	switch {
	case err != nil:
		return s.retry(log, err, "tracking the job")
	case created:
		log.Info().Msg("tracking")
		s.indexRemote(ctx, r, rec.Job, log)
		return events.Done(), "tracked"
	case rec.App != m.App:
		// Another app's: said as nothing about that job.
		return s.reject(ctx, in, id, &events.FieldError{Field: "id", Problem: "already used by another job"})
	case rec.Route != r.Name || rec.RemoteID != m.RemoteID:
		return s.reject(ctx, in, id, &events.FieldError{Field: "id", Problem: fmt.Sprintf("already used by job of remote id %s on route %s", rec.RemoteID, rec.Route)})
	}
	if err := s.jobs.Resume(ctx, rec); err != nil {
		return s.retry(log, err, "arming the job's check")
	}
	return events.Done(), "duplicate"
}

// indexRemote records the job's remote id in the remote index when its
// route's webhooks name only the remote job (see jobs.Intake.IndexRemote).
// Best effort, a few tries: without the entry, the job's webhook cannot be
// routed, and its polls find its end anyway.
func (s *Service) indexRemote(ctx context.Context, r *route.Route, j *state.Job, log zerolog.Logger) {
	if !r.Adapter.Info().WebhooksByRemoteID || j.RemoteID == "" {
		return
	}
	var err error
	for try := range 3 {
		if err = s.jobs.IndexRemote(ctx, r.Name, j.RemoteID, j.ID); err == nil {
			return
		}
		if !schedule.Sleep(ctx, time.Duration(try+1)*200*time.Millisecond) {
			break
		}
	}
	log.Warn().Err(err).Msg("indexing the remote id failed: the provider's webhooks for this job cannot be routed; polls follow it")
}
