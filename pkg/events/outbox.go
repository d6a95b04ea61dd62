package events

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The outbox of outbound webhooks (package notify). The job events an
// application endpoint is to receive are copied, in order, to
// Outbox(endpoint, job), a work queue delivered per endpoint; the state of
// each job's deliveries to each endpoint is kept in OutboxBucket under
// OutboxKey(job, endpoint). Both are made by the process that delivers,
// when the configuration names endpoints.

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
