package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The outbox of outbound webhooks (package notify). The job events an
// application endpoint is to receive are copied, in order, to
// Outbox(endpoint, job), a work queue delivered per endpoint; the state of
// each job's deliveries to each endpoint is kept in OutboxBucket under
// OutboxKey(job, endpoint) as an OutboxDelivery, which the deliverer
// writes and the front door and `pollux get` read (OutboxDeliveries). Both
// are made by the process that delivers, when the configuration names
// endpoints.

// OutboxStream names the work-queue stream of deliveries to endpoints.
func (n Namespace) OutboxStream() string { return n.stream("OUTBOX") }

// Outbox is the subject of a job's deliveries to an endpoint.
func (n Namespace) Outbox(endpoint, job string) string { return n.subject("outbox", endpoint, job) }

// OutboxBucket names the bucket of delivery states.
func (n Namespace) OutboxBucket() string { return n.prefix + "-outbox" }

// OutboxKey is the key of job's delivery state at endpoint.
func OutboxKey(job, endpoint string) string { return job + "." + endpoint }

// OutboxStreamConfig is the stream of deliveries: a work queue (a
// delivery leaves once made or given up), deduplicated on the event for
// an hour (the copy of an event redelivered to the copier).
func (n Namespace) OutboxStreamConfig(o Options) jetstream.StreamConfig {
	o = o.WithDefaults()
	return jetstream.StreamConfig{
		Name:        n.OutboxStream(),
		Description: "Pollux outbound webhooks: job events waiting for delivery to application endpoints",
		Subjects:    []string{n.subject("outbox", "*", "*")},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     o.storage(),
		Replicas:    o.Replicas,
		Duplicates:  time.Hour,
		MaxAge:      31 * 24 * time.Hour,
		MaxMsgSize:  1 << 20,
	}
}

// OutboxBucketConfig is the bucket of delivery states, kept a week after
// their last change.
func (n Namespace) OutboxBucketConfig(o Options) jetstream.KeyValueConfig {
	o = o.WithDefaults()
	return jetstream.KeyValueConfig{
		Bucket: n.OutboxBucket(), Description: "Pollux outbound webhook delivery states",
		History: 1, TTL: 7 * 24 * time.Hour, Storage: o.storage(), Replicas: o.Replicas,
	}
}

// OutboxDelivery is the state of one job's deliveries to one endpoint, as
// the outbox bucket keeps it under OutboxKey: the deliverer (package
// notify) writes it after every attempt; the front door and `pollux get`
// show it.
type OutboxDelivery struct {
	Endpoint string `json:"endpoint"`
	// URL is the submission's own endpoint's, for the endpoint
	// "submission"; empty for a configured one.
	URL string `json:"url,omitempty"`
	// State is OutboxDelivering (a delivery is being retried),
	// OutboxDelivered (the last one reached the endpoint) or OutboxGivenUp
	// (one was given up: past the horizon, refused by Pollux's address
	// rules, or answered 410).
	State string `json:"state"`
	// Seq is the job event the last attempt was about; Delivered the
	// latest delivered.
	Seq       uint64 `json:"seq"`
	Delivered uint64 `json:"delivered_seq,omitempty"`
	// Attempts counts the attempts of Seq's delivery; Total every attempt
	// for the job.
	Attempts int `json:"attempts"`
	Total    int `json:"total_attempts"`
	// Last is the last attempt's answer ("HTTP 503", a network error).
	Last   string    `json:"last,omitempty"`
	LastAt time.Time `json:"last_at"`
	// NextAt is when the next attempt is due, while delivering.
	NextAt time.Time `json:"next_at,omitzero"`
}

// The states of an OutboxDelivery.
const (
	OutboxDelivering = "delivering"
	OutboxDelivered  = "delivered"
	OutboxGivenUp    = "given_up"
)

// OutboxDeliveries returns a job's delivery states, one per endpoint, by
// endpoint; none when the outbox bucket does not exist (no endpoint is
// configured) or nothing was delivered. A state that cannot be read, or
// is gone meanwhile, is left out.
func OutboxDeliveries(ctx context.Context, js jetstream.JetStream, ns Namespace, job string) ([]OutboxDelivery, error) {
	kv, err := js.KeyValue(ctx, ns.OutboxBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox bucket: %w", err)
	}
	lister, err := kv.ListKeysFiltered(ctx, OutboxKey(job, "*"))
	if err != nil {
		return nil, fmt.Errorf("listing deliveries: %w", err)
	}
	var out []OutboxDelivery
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // gone meanwhile
		}
		var d OutboxDelivery
		if json.Unmarshal(e.Value(), &d) == nil {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b OutboxDelivery) int { return cmp.Compare(a.Endpoint, b.Endpoint) })
	return out, nil
}
