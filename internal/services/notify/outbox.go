package notify

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// natsMsg is a delivery to copy to the outbox.
type natsMsg struct {
	subject string
	data    []byte
	url     string // a submission's own endpoint
}

// publish copies a delivery to the outbox, deduplicated on id (a copy
// redelivered to the copier is stored once).
func (s *Service) publish(ctx context.Context, m *natsMsg, id string) error {
	msg := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{}}
	if m.url != "" {
		msg.Header.Set(HeaderURL, m.url)
	}
	_, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id))
	return err
}

// state reads a job's delivery state at an endpoint; a fresh one when
// there is none or it cannot be read (a retry's attempt count then starts
// over, which only shortens its next wait).
func (s *Service) state(ctx context.Context, job, endpoint string) events.OutboxDelivery {
	d := events.OutboxDelivery{Endpoint: endpoint}
	e, err := s.states.Get(ctx, events.OutboxKey(job, endpoint))
	if err == nil {
		_ = json.Unmarshal(e.Value(), &d)
		d.Endpoint = endpoint
	}
	return d
}

// save writes a job's delivery state at an endpoint; best effort (it is
// what `pollux get` shows, and a retry's attempt count).
func (s *Service) save(ctx context.Context, job string, d events.OutboxDelivery) {
	b, err := json.Marshal(d)
	if err == nil {
		_, err = s.states.Put(ctx, events.OutboxKey(job, d.Endpoint), b)
	}
	if err != nil {
		s.log.Warn().Err(err).Str(logkey.JobID, job).Str(logkey.Endpoint, d.Endpoint).Msg("saving a delivery state failed")
	}
}
