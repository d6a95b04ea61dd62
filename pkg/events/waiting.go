package events

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The admission queue. A submission that cannot start because a budget
// level's running slots are all taken (or because others wait before it)
// is stored as a waiting job and a ticket naming it is published on
// Waiting(queue, tenant): one subject per tenant of the queue, in arrival
// order. Ingest admits tickets by weighted fair queueing across the
// tenants with tickets, each tenant's oldest first, and deletes a ticket
// once its job is submitted or ended.

// WaitingStream names the stream of admission tickets.
func (n Namespace) WaitingStream() string { return n.stream("WAITING") }

// Waiting is the subject of a tenant's tickets in an admission queue (a
// budget scope: the account's, or the route's when it names none).
func (n Namespace) Waiting(queue, tenant string) string { return n.subject("waiting", queue, tenant) }

// WaitingStreamConfig is the stream of admission tickets: kept until
// deleted (a ticket leaves when its job is admitted or ended), deduplicated
// by job for the stream's duplicates window.
func (n Namespace) WaitingStreamConfig(o Options) jetstream.StreamConfig {
	o = o.WithDefaults()
	return jetstream.StreamConfig{
		Name:        n.WaitingStream(),
		Description: "Pollux admission tickets: submissions waiting for a running slot, per queue and tenant",
		Subjects:    []string{n.subject("waiting", "*", "*")},
		Retention:   jetstream.LimitsPolicy,
		Storage:     o.storage(),
		Replicas:    o.Replicas,
		MaxMsgSize:  1 << 10,
		Duplicates:  2 * time.Minute,
	}
}

// Ticket is an admission ticket: the job that waits.
type Ticket struct {
	V     int    `json:"v"`
	JobID string `json:"job_id"`
	Route string `json:"route"`
}

// TicketID is the Nats-Msg-Id of a job's ticket after its submit attempt
// attempt ("" before any): publishing it twice queues the job once, and a
// job that waits again after an attempt (the provider refused it for its
// running cap) gets a ticket of its own.
func TicketID(job, attempt string) string {
	if attempt == "" {
		return "wait:" + job
	}
	return "wait:" + job + "/" + attempt
}

// DecodeTicket reads a ticket.
func DecodeTicket(data []byte) (*Ticket, error) {
	var t Ticket
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("ticket: %w", err)
	}
	if !ValidToken(t.JobID) || !ValidToken(t.Route) {
		return nil, fmt.Errorf("ticket: job_id %q or route %q is not a valid token", t.JobID, t.Route)
	}
	return &t, nil
}

// NoTenant is the tenant token of submissions that name none.
const NoTenant = "_"

// TenantToken is the subject token of a tenant: the tenant itself when it
// is a short valid token, else "~" and a hash of it; NoTenant for "".
func TenantToken(tenant string) string {
	switch {
	case tenant == "":
		return NoTenant
	case ValidToken(tenant) && len(tenant) <= 64:
		return tenant
	}
	h := fnv.New64a()
	h.Write([]byte(tenant))
	return "~" + strconv.FormatUint(h.Sum64(), 36)
}
