package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
)

// Delivery is the state of one job's deliveries to one endpoint, as the
// outbox bucket keeps it (events.OutboxKey) and `pollux get` shows it.
type Delivery struct {
	Endpoint string `json:"endpoint"`
	// URL is the submission's own endpoint's, for the endpoint
	// "submission"; empty for a configured one.
	URL string `json:"url,omitempty"`
	// State is delivering (a delivery is being retried), delivered (the
	// last one reached the endpoint) or given_up (one was given up: past
	// the horizon, refused by Pollux's address rules, or answered 410).
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

// Delivery states.
const (
	StateDelivering = "delivering"
	StateDelivered  = "delivered"
	StateGivenUp    = "given_up"
)

// Deliveries returns a job's delivery states, one per endpoint, by
// endpoint; none when the outbox bucket does not exist (no endpoint is
// configured) or nothing was delivered.
func Deliveries(ctx context.Context, js jetstream.JetStream, ns events.Namespace, job string) ([]Delivery, error) {
	kv, err := js.KeyValue(ctx, ns.OutboxBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox bucket: %w", err)
	}
	lister, err := kv.ListKeysFiltered(ctx, events.OutboxKey(job, "*"))
	if err != nil {
		return nil, fmt.Errorf("listing deliveries: %w", err)
	}
	var out []Delivery
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // gone meanwhile
		}
		var d Delivery
		if json.Unmarshal(e.Value(), &d) == nil {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b Delivery) int {
		switch {
		case a.Endpoint < b.Endpoint:
			return -1
		case a.Endpoint > b.Endpoint:
			return 1
		}
		return 0
	})
	return out, nil
}
