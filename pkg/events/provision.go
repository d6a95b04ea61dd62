package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Options sizes the streams and buckets of a namespace. The zero value means
// the defaults given on each field.
type Options struct {
	// Replicas of every stream, bucket and consumer (default 1; 3 in a
	// cluster).
	Replicas int
	// MemoryStorage keeps everything in memory (default: file storage).
	MemoryStorage bool
	// IntakeMaxBytes caps unprocessed intake; when full, publishing fails
	// (back-pressure) rather than dropping accepted work (default 1 GiB).
	IntakeMaxBytes int64
	// EventsMaxAge is how long events are kept for replay (default 7 days).
	EventsMaxAge time.Duration
	// EventsMaxBytes caps the events stream; the oldest events go first
	// (default 10 GiB).
	EventsMaxBytes int64
	// WebhookDuplicates is the webhook stream's duplicate window: a
	// delivery id seen within it is dropped (default 72h, the longest
	// provider retry horizon).
	WebhookDuplicates time.Duration
	// JobsTTL is how long a job record outlives its last write; it is also
	// how long an idempotency key deduplicates after the job ends (default
	// 7 days).
	JobsTTL time.Duration
	// IntakeAckWait is how long an intake message taken by a process that
	// died waits before another process takes it (default 60s); a live
	// process keeps the messages it works on.
	IntakeAckWait time.Duration
	// CheckAckWait is the same for check messages (default 30s).
	CheckAckWait time.Duration
	// ParkAfter is the shortest wait before a job's next poll that parks
	// its check as a message schedule instead of keeping it nak-delayed
	// in the poller's consumer (default 1m; negative: never park). A
	// nak-delayed check costs the server on every redelivery tick and
	// every consumer state write; a parked one costs nothing while it
	// waits (see ParkedLead).
	ParkAfter time.Duration
}

// IntakeDuplicates is the intake stream's duplicate window: a message
// whose Nats-Msg-Id (IntakeMsgID) the stream stored within it is dropped,
// its publisher answered with a duplicate's ack (the server's default,
// written down: the front door holds a submission in doubt for at most
// half of it).
const IntakeDuplicates = 2 * time.Minute

// ParkedLead is how long before its poll is due a parked check fires onto
// its check subject. The message scheduler runs at most every 250 ms and
// fires a few hundred milliseconds late under load, so the check is back
// in the consumer early and its first delivery waits (nak-delayed) until
// the poll is due, to the millisecond. The lead is short because every
// check back early waits ack-pending in the consumer, which is what
// parking saves (measured at 1M tracked: the consumer's redelivery scans
// cost the server in proportion to those; a 5 s lead kept 11,000 checks
// pending and cost ~19 % of a core, 2 s with fire times rounded down to
// the second kept 4,500).
const ParkedLead = time.Second

// ScheduleAt is the Nats-Schedule header value of a schedule firing once
// at t: "@at" and t in RFC 3339 with its fraction of a second, which the
// server keeps (its parser reads RFC 3339 whole; the Go client's
// WithScheduleAt would drop the fraction and fire up to a second early).
func ScheduleAt(t time.Time) string { return "@at " + t.UTC().Format(time.RFC3339Nano) }

// MinParkAfter is the shortest ParkAfter allowed: a check parks only for
// a wait well beyond ParkedLead and the scheduler's lateness.
const MinParkAfter = 15 * time.Second

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	o.Replicas = cmp.Or(o.Replicas, 1)
	o.IntakeMaxBytes = cmp.Or(o.IntakeMaxBytes, 1<<30)
	o.EventsMaxAge = cmp.Or(o.EventsMaxAge, 7*24*time.Hour)
	o.EventsMaxBytes = cmp.Or(o.EventsMaxBytes, 10<<30)
	o.WebhookDuplicates = cmp.Or(o.WebhookDuplicates, 72*time.Hour)
	o.JobsTTL = cmp.Or(o.JobsTTL, 7*24*time.Hour)
	o.IntakeAckWait = cmp.Or(o.IntakeAckWait, time.Minute)
	o.CheckAckWait = cmp.Or(o.CheckAckWait, 30*time.Second)
	o.ParkAfter = cmp.Or(o.ParkAfter, time.Minute)
	return o
}

func (o Options) storage() jetstream.StorageType {
	if o.MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// Streams returns the configurations of the namespace's streams.
func (n Namespace) Streams(o Options) []jetstream.StreamConfig {
	o = o.WithDefaults()
	return []jetstream.StreamConfig{
		{
			Name:        n.IntakeStream(),
			Description: "Pollux intake: submit, track and cancel requests",
			Subjects:    []string{n.Intake(KindSubmit, "*"), n.Intake(KindTrack, "*"), n.Intake(KindCancel, "*")},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     o.storage(),
			Replicas:    o.Replicas,
			MaxBytes:    o.IntakeMaxBytes,
			Discard:     jetstream.DiscardNew,
			MaxMsgSize:  1 << 20,
			Duplicates:  IntakeDuplicates,
		},
		{
			// One check message per job, on its check subject or parked
			// (a message schedule on its parked subject, see Parked).
			// Publishers say which message they expect on the job's two
			// subjects (none to arm, the one they hold to replace or park
			// it), so a replacement drops the old message in the same
			// step. No limit on messages or bytes: nothing is ever
			// discarded but the one a replacement replaces (message
			// schedules need the discard policy "old" and roll-ups, which
			// schedules alone use).
			Name:              n.ChecksStream(),
			Description:       "Pollux check messages: one poll timer per tracked job",
			Subjects:          []string{n.subject("checks", "*", "*", "*"), n.AllParked()},
			Retention:         jetstream.WorkQueuePolicy,
			Storage:           o.storage(),
			Replicas:          o.Replicas,
			MaxMsgsPerSubject: 1,
			Discard:           jetstream.DiscardOld,
			MaxMsgSize:        MaxCheckBytes,
			AllowMsgSchedules: true,
			AllowRollup:       true,
			// Direct gets count a route's parked checks (census).
			AllowDirect: true,
		},
		{
			Name:        n.WebhooksStream(),
			Description: "Pollux verified webhook deliveries",
			Subjects:    []string{n.subject("webhooks", "*")},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     o.storage(),
			Replicas:    o.Replicas,
			Duplicates:  o.WebhookDuplicates,
			MaxAge:      max(7*24*time.Hour, o.WebhookDuplicates),
			MaxBytes:    o.IntakeMaxBytes,
			Discard:     jetstream.DiscardNew,
			MaxMsgSize:  1 << 20,
		},
		{
			// Budget leases: one message per lease, each on a subject of
			// its own, so adding a lease twice is refused.
			Name:                 n.SlotsStream(),
			Description:          "Pollux budget leases: one message per call slot",
			Subjects:             []string{n.subject("slots", "*", "*", "*")},
			Retention:            jetstream.WorkQueuePolicy,
			Storage:              o.storage(),
			Replicas:             o.Replicas,
			MaxMsgsPerSubject:    1,
			Discard:              jetstream.DiscardNew,
			DiscardNewPerSubject: true,
			MaxMsgSize:           1 << 10,
		},
		{
			Name:        n.EventsStream(),
			Description: "Pollux job events, replayable by any client",
			Subjects:    []string{n.Events()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     o.storage(),
			Replicas:    o.Replicas,
			MaxAge:      o.EventsMaxAge,
			MaxBytes:    o.EventsMaxBytes,
			Discard:     jetstream.DiscardOld,
		},
	}
}

// Buckets returns the configurations of the namespace's KV buckets.
func (n Namespace) Buckets(o Options) []jetstream.KeyValueConfig {
	o = o.WithDefaults()
	return []jetstream.KeyValueConfig{
		{
			Bucket: n.JobsBucket(), Description: "Pollux job records",
			History: 1, TTL: o.JobsTTL, Storage: o.storage(), Replicas: o.Replicas,
		},
		{
			Bucket: n.RoutesBucket(), Description: "Pollux route pauses",
			History: 1, Storage: o.storage(), Replicas: o.Replicas,
		},
		{
			Bucket: n.StatsBucket(), Description: "Pollux learned duration statistics",
			History: 1, Storage: o.storage(), Replicas: o.Replicas,
		},
		{
			Bucket: n.LimitsBucket(), Description: "Pollux learned call rates",
			History: 1, Storage: o.storage(), Replicas: o.Replicas,
		},
		{
			// Webhook delivery ids seen, for the providers' whole retry
			// horizon: the stream's duplicate window forgets consumed
			// messages when the server restarts.
			Bucket: n.DeliveriesBucket(), Description: "Pollux webhook deliveries seen",
			History: 1, TTL: o.WebhookDuplicates, Storage: o.storage(), Replicas: o.Replicas,
		},
		{
			// Per-key TTLs: an admitted job's record outlives any period
			// its estimate counts in, then goes.
			Bucket: n.SpendBucket(), Description: "Pollux apps' spend",
			History: 1, Storage: o.storage(), Replicas: o.Replicas, LimitMarkerTTL: time.Hour,
		},
	}
}

// IngestConsumerConfig is the durable consumer of one route's intake.
func (n Namespace) IngestConsumerConfig(route string, o Options) jetstream.ConsumerConfig {
	o = o.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:        n.IngestConsumer(route),
		Description:    "Pollux ingest for route " + route,
		FilterSubjects: []string{n.Submit(route), n.Track(route), n.Cancel(route)},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        o.IntakeAckWait,
		MaxDeliver:     -1,
		MaxAckPending:  1024,
		Replicas:       o.Replicas,
	}
}

// PollerConsumerConfig is the durable consumer of partition p of parts of
// one route's check messages (0 of 1: all of them). A check waiting for its
// next poll is nak-delayed and stays ack-pending at the server, so
// MaxAckPending is unlimited (any cap would cap the number of tracked jobs)
// and MaxDeliver is unlimited (a finite value silently parks a long-tracked
// job forever). No BackOff: it would add to every NakWithDelay.
func (n Namespace) PollerConsumerConfig(route string, p, parts int, o Options) jetstream.ConsumerConfig {
	o = o.WithDefaults()
	c := jetstream.ConsumerConfig{
		Durable:       n.PartitionConsumer(route, p, parts),
		Description:   "Pollux poller for route " + route,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.CheckAckWait,
		MaxDeliver:    -1,
		MaxAckPending: -1,
		Replicas:      o.Replicas,
	}
	if f := n.PartitionChecks(route, p, parts); len(f) == 1 {
		c.FilterSubject = f[0]
	} else {
		c.FilterSubjects = f
		c.Description += fmt.Sprintf(", partition %d of %d", p, parts)
	}
	return c
}

// BudgetConsumer names the durable consumer of a route's budget of a kind.
func (n Namespace) BudgetConsumer(route, kind string) string { return "budget-" + route + "-" + kind }

// BudgetConsumerConfig is the durable consumer that holds a route's budget
// of one kind (SlotSubmit or SlotStatus): at most limit leases are out at
// once (MaxAckPending), a lease not returned within leaseWait comes back on
// its own (AckWait: the crash lease).
func (n Namespace) BudgetConsumerConfig(route, kind string, limit int, leaseWait time.Duration, o Options) jetstream.ConsumerConfig {
	o = o.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:       n.BudgetConsumer(route, kind),
		Description:   "Pollux " + kind + " budget of route " + route,
		FilterSubject: n.Slots(route, kind),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       leaseWait,
		MaxDeliver:    -1,
		MaxAckPending: limit,
		Replicas:      o.Replicas,
	}
}

// RunningStreamConfig is the stream of a budget level's running slots:
// one message per job (subject Running(scope, job)) from just before its
// create call until it ends, at most limit of them. A take past the limit
// is refused (MaxMsgs with DiscardNew), and so is a second take by the
// same job (one message per subject, DiscardNewPerSubject): the server
// alone decides, so the cap holds however many processes take at once.
// Lowering the limit keeps the slots taken (the server drops none); takes
// are refused until enough jobs end.
func (n Namespace) RunningStreamConfig(level, name string, limit int, o Options) jetstream.StreamConfig {
	o = o.WithDefaults()
	desc := "Pollux running slots of the global level"
	if level != LevelGlobal {
		desc = "Pollux running slots of " + level + " " + name
	}
	return jetstream.StreamConfig{
		Name:                 n.RunningStream(level, name),
		Description:          desc,
		Subjects:             []string{n.Running(Scope(level, name), "*")},
		Retention:            jetstream.LimitsPolicy,
		Storage:              o.storage(),
		Replicas:             o.Replicas,
		MaxMsgs:              int64(limit),
		MaxMsgsPerSubject:    1,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		MaxMsgSize:           1 << 10,
	}
}

// WebhookConsumerConfig is the durable consumer that applies verified
// webhook deliveries to job state.
func (n Namespace) WebhookConsumerConfig(o Options) jetstream.ConsumerConfig {
	o = o.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:       n.WebhookConsumer(),
		Description:   "Pollux webhook applier",
		FilterSubject: n.subject("webhooks", "*"),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		MaxAckPending: 1024,
		Replicas:      o.Replicas,
	}
}

// Resources are the namespace's streams and buckets, ready to use.
type Resources struct {
	Intake, Checks, Webhooks, Slots, Events        jetstream.Stream
	Jobs, Routes, Stats, Limits, Deliveries, Spend jetstream.KeyValue
	// JS is the JetStream they were found in (the running-slot streams,
	// one per capped budget level, are looked up through it).
	JS jetstream.JetStream
}

// Setup creates or updates every stream and bucket of the namespace. It is
// idempotent and safe to run from many processes at once. A stream or bucket
// that exists with a definition Pollux cannot work with (other subjects, a
// different retention, ...) is reported as an *IncompatibleError and left
// alone; differences Pollux can reconcile (limits, replicas) are updated.
//
// A cluster still forming (no peers for the replicas yet, no meta leader,
// no answer) is waited out, retrying every 250ms until ctx ends.
func (n Namespace) Setup(ctx context.Context, js jetstream.JetStream, o Options) (*Resources, error) {
	return UntilFormed(ctx, func(actx context.Context) (*Resources, error) { return n.setup(actx, js, o) })
}

// UntilFormed runs attempt until it succeeds or fails for a reason other
// than a JetStream cluster still forming (no peers for the replicas yet,
// no meta leader, no answer), every 250ms until ctx ends: how every
// stream, bucket and object store Pollux creates at start is created.
func UntilFormed[T any](ctx context.Context, attempt func(context.Context) (T, error)) (T, error) {
	for {
		// A request made while the cluster elects its meta leader may get
		// no answer at all: each attempt has its own deadline.
		actx, cancel := context.WithTimeout(ctx, setupAttempt)
		r, err := attempt(actx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", err, errNoAnswer)
		}
		if err == nil || !forming(err) {
			return r, err
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("%w (the cluster did not become ready: %w)", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// setupAttempt bounds one attempt of Setup.
const setupAttempt = 10 * time.Second

// errNoAnswer marks an attempt that got no answer in time.
var errNoAnswer = errors.New("no answer from JetStream")

// forming reports an error a JetStream cluster answers while it forms:
// not enough peers known for the replicas (10005), the system temporarily
// unavailable (10008) or no leader yet (10009, 503).
func forming(err error) bool {
	if errors.Is(err, errNoAnswer) {
		return true
	}
	if IsAPIError(err, CodeNoPeers, CodeUnavailable, CodeNotLeader) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == 503
}

func (n Namespace) setup(ctx context.Context, js jetstream.JetStream, o Options) (*Resources, error) {
	r := Resources{JS: js}
	streams := n.Streams(o)
	dst := []*jetstream.Stream{&r.Intake, &r.Checks, &r.Webhooks, &r.Slots, &r.Events}
	for i, cfg := range streams {
		s, err := EnsureStream(ctx, js, cfg)
		if err != nil {
			return nil, err
		}
		*dst[i] = s
	}
	kvs := []*jetstream.KeyValue{&r.Jobs, &r.Routes, &r.Stats, &r.Limits, &r.Deliveries, &r.Spend}
	for i, cfg := range n.Buckets(o) {
		kv, err := EnsureBucket(ctx, js, cfg)
		if err != nil {
			return nil, err
		}
		*kvs[i] = kv
	}
	return &r, nil
}

// Open looks up the namespace's streams and buckets without creating or
// changing anything: for tools that only read.
func (n Namespace) Open(ctx context.Context, js jetstream.JetStream) (*Resources, error) {
	r := Resources{JS: js}
	dst := []*jetstream.Stream{&r.Intake, &r.Checks, &r.Webhooks, &r.Slots, &r.Events}
	for i, cfg := range n.Streams(Options{}) {
		s, err := js.Stream(ctx, cfg.Name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w (is Pollux running with prefix %q?)", cfg.Name, err, n.prefix)
		}
		*dst[i] = s
	}
	kvs := []*jetstream.KeyValue{&r.Jobs, &r.Routes, &r.Stats, &r.Limits, &r.Deliveries, &r.Spend}
	for i, cfg := range n.Buckets(Options{}) {
		kv, err := js.KeyValue(ctx, cfg.Bucket)
		if err != nil {
			return nil, fmt.Errorf("bucket %s: %w (is Pollux running with prefix %q?)", cfg.Bucket, err, n.prefix)
		}
		*kvs[i] = kv
	}
	return &r, nil
}
