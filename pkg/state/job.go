package state

import (
	"encoding/json"
	"slices"
	"time"
)

// State is a job's normalized state.
type State string

// The job states. Unknown is never a job's state: it is what an observation
// carries when a provider reports a value Pollux cannot map, and it never moves
// a job.
const (
	Pending   State = "pending"
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Canceled  State = "canceled"
	Expired   State = "expired"
	Lost      State = "lost"
	Unknown   State = "unknown"
)

// States lists every job state in lifecycle order.
var States = []State{Pending, Queued, Running, Succeeded, Failed, Canceled, Expired, Lost}

// Terminal reports whether s absorbs all later observations.
func (s State) Terminal() bool {
	switch s {
	case Succeeded, Failed, Canceled, Expired, Lost:
		return true
	}
	return false
}

// Valid reports whether s is a job state (Unknown is not).
func (s State) Valid() bool {
	return s.rank() >= 0
}

// rank orders states along the lifecycle; -1 for values that are not states.
func (s State) rank() int {
	switch s {
	case Pending:
		return 0
	case Queued:
		return 1
	case Running:
		return 2
	case Succeeded, Failed, Canceled, Expired, Lost:
		return 3
	}
	return -1
}

// Source says how Pollux learned of an observation.
type Source string

// Observation sources.
const (
	FromSubmit  Source = "submit"
	FromPoll    Source = "poll"
	FromWebhook Source = "webhook"
	FromCancel  Source = "cancel"
	FromPollux  Source = "pollux" // Pollux's own decision: deadline, lost, rejected cancel
	FromHedge   Source = "hedge"  // the job's hedge succeeded first (see Routing)
)

// Job is the record of one tracked job, stored as JSON under its id in the
// jobs bucket and carried as the snapshot in every event.
type Job struct {
	// ID is the job's id: given by the submitter or derived from the
	// idempotency key; [A-Za-z0-9_-], at most 128 bytes.
	ID string `json:"id"`
	// Route is the configured provider route the job runs on.
	Route string `json:"route"`
	// Model is the provider's model identifier.
	Model string `json:"model"`
	// ConfigKey optionally refines the model for learned statistics (for
	// example a resolution or clip length).
	ConfigKey string `json:"config_key,omitempty"`
	// Length is the output length, in seconds, the submission asked for
	// (the value of its route's length_from input field); 0 when unknown.
	// The model's learned durations are regressed on it.
	Length float64 `json:"length_s,omitempty"`
	// RemoteID is the provider's id for the job; empty until submitted.
	RemoteID string `json:"remote_id,omitempty"`
	// ProviderRef is what the provider's adapter keeps to reach the job
	// again (opaque; see provider.Status.RefData).
	ProviderRef json.RawMessage `json:"provider_ref,omitempty"`
	// State is the normalized state.
	State State `json:"state"`
	// ProviderStatus is the provider's raw status value, as last seen.
	ProviderStatus string `json:"provider_status,omitempty"`
	// Reason explains a failed, canceled, expired or lost job.
	Reason string `json:"reason,omitempty"`
	// Progress is the provider's progress in [0, 1], when it reports one.
	Progress *float64 `json:"progress,omitempty"`
	// QueuePosition is the provider's queue position, when it reports one.
	QueuePosition *int `json:"queue_position,omitempty"`

	// Input is the submission's provider input, kept until the job is
	// submitted so that a crashed ingester's successor can submit it —
	// and for good when KeepInput is set, or when the provider never had
	// the job, so that it can be resubmitted.
	Input json.RawMessage `json:"input,omitempty"`
	// KeepInput keeps Input after the provider has the job (its route's
	// keep_inputs).
	KeepInput bool `json:"keep_input,omitempty"`
	// Metadata is the submitter's opaque metadata, returned in every event.
	Metadata map[string]string `json:"metadata,omitempty"`
	// IdempotencyKey is the submitter's idempotency key, if any.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Tracked is true when the job was submitted elsewhere and handed to
	// Pollux to track.
	Tracked bool `json:"tracked,omitempty"`
	// NotifyURL is the submitter's own endpoint for the job's events
	// (events.Submit.NotifyURL).
	NotifyURL string `json:"notify_url,omitempty"`
	// Routing is how a model route chose the job's route; nil for a job
	// submitted to its route directly.
	Routing *Routing `json:"routing,omitempty"`
	// IntakeSeq is the intake stream sequence of the message that owns the
	// submission; other messages for the same id are duplicates.
	IntakeSeq uint64 `json:"intake_seq,omitempty"`
	// Trace is the job's W3C trace context (a traceparent): the span its
	// record was created in, parent of every later span about the job
	// (see internal/platform/tracing); empty when tracing was off then.
	Trace string `json:"trace,omitempty"`
	// SubmitAttempts counts Submit calls started for this job. A redelivered
	// submission that finds an attempt without a remote id knows the outcome
	// of that call is in doubt.
	SubmitAttempts int `json:"submit_attempts,omitempty"`
	// SubmitFailures counts the submit calls that failed for the job's
	// own sake — answered with a 5xx, or left in doubt and tried again —
	// which grow the wait before the next (not a rate limit or refused
	// credentials: those pause the route, not the job).
	SubmitFailures int `json:"submit_failures,omitempty"`
	// SubmitInDoubt is set before a Submit call and cleared once its
	// outcome is known. Found set, it means the provider may have the job
	// although the record has no remote id.
	SubmitInDoubt bool `json:"submit_in_doubt,omitempty"`
	// AttemptedAt is when the latest Submit call started, and AttemptID
	// that attempt's random id: a writer whose mark of an attempt may or
	// may not have landed (its answer was lost) knows its own by it.
	AttemptedAt time.Time `json:"attempted_at,omitzero"`
	AttemptID   string    `json:"attempt_id,omitempty"`
	// Slots are the running slots the job holds, taken before its create
	// call. The write that ends the job clears them, and its writer frees
	// the slots.
	Slots []Slot `json:"slots,omitempty"`
	// WaitingFor says why a job not yet submitted waits: its route is
	// paused ("route paused by <who>: <reason>", "route paused:
	// rate_limit", "account <name> paused: rate_limit"), a budget level
	// ("account x") whose running slots were all taken when it last tried
	// to start, "queue <name>" (others wait for slots before it), "the
	// provider's running cap". It waits in JetStream meanwhile. Cleared
	// when its create call starts.
	WaitingFor string `json:"waiting_for,omitempty"`

	// CreatedAt is when Pollux accepted the job.
	CreatedAt time.Time `json:"created_at"`
	// SubmittedAt is when the provider accepted it (its own created time
	// when it reports one).
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
	// StartedAt is when the provider started running it, when known.
	StartedAt time.Time `json:"started_at,omitzero"`
	// CompletedAt is when the job reached its terminal state: the
	// provider's own completion time when it gives one, else DetectedAt.
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// DetectedAt is when Pollux learned of the terminal state.
	DetectedAt time.Time `json:"detected_at,omitzero"`
	// DetectedBy says how Pollux learned of the terminal state.
	DetectedBy Source `json:"detected_by,omitempty"`
	// Deadline is when Pollux stops waiting and expires the job.
	Deadline time.Time `json:"deadline,omitzero"`
	// ExpectedDuration is the submitter's hint of how long the job takes.
	ExpectedDuration Duration `json:"expected_duration,omitempty"`
	// WebhookExpected is true when the provider will notify Pollux by
	// webhook, so polling only reconciles.
	WebhookExpected bool `json:"webhook_expected,omitempty"`
	// CancelRequestedAt is when a cancel was requested.
	CancelRequestedAt time.Time `json:"cancel_requested_at,omitzero"`
	// CancelReason is the reason the cancel request gave, and
	// CancelRequestedBy who asked (events.Cancel.By).
	CancelReason      string `json:"cancel_reason,omitempty"`
	CancelRequestedBy string `json:"cancel_requested_by,omitempty"`
	// SubmittedBy is who asked for the job and SubmitReason why
	// (events.Submit.By and Reason), when the submission said.
	SubmittedBy  string `json:"submitted_by,omitempty"`
	SubmitReason string `json:"submit_reason,omitempty"`
	// App is the application the job belongs to (events.Submit.App; ""
	// for none): only the app's front door tokens, and operators, see it.
	App string `json:"app,omitempty"`
	// ResubmitOf is the finished job this one resubmits, and
	// ResubmittedAs the jobs that resubmit this one (written when each
	// is accepted).
	ResubmitOf    string   `json:"resubmit_of,omitempty"`
	ResubmittedAs []string `json:"resubmitted_as,omitempty"`

	// Polls counts status calls made for this job. While a job is
	// unchanged its polls write nothing (they are counted by its check,
	// see package jobs): the count is brought up to date at each write
	// and is exact once the job is terminal and PollsOpen is false.
	Polls int `json:"polls"`
	// PollsOpen is true while a terminal job's check is still out: a poll
	// it makes next is added to Polls and then the check ends.
	PollsOpen bool `json:"polls_open,omitempty"`
	// Webhooks counts webhook deliveries applied to this job.
	Webhooks int `json:"webhooks"`
	// Deliveries are the ids of the latest deliveries applied (at most
	// MaxDeliveries), so a delivery that reaches the job twice is applied
	// once.
	Deliveries []string `json:"deliveries,omitempty"`
	// LastPolledAt is the time of the latest status call, as of the
	// record's latest write (see Polls).
	LastPolledAt time.Time `json:"last_polled_at,omitzero"`
	// ChangedAt is when the job last changed state or progress; the
	// schedule backs off with the time since.
	ChangedAt time.Time `json:"changed_at,omitzero"`
	// NextCheckAt is when the status check after the latest write was due
	// (see Polls).
	NextCheckAt time.Time `json:"next_check_at,omitzero"`
	// Unchanged counts the polls since the job last changed, as of the
	// latest write; the schedule backs off with it.
	Unchanged int `json:"unchanged,omitempty"`
	// Errors counts consecutive failed status calls.
	Errors int `json:"errors,omitempty"`
	// NotFound counts consecutive "unknown job" answers from the provider.
	NotFound int `json:"not_found,omitempty"`
	// Refused counts consecutive status calls the provider refused as
	// invalid.
	Refused int `json:"refused,omitempty"`
	// LastError is the latest error, for operators.
	LastError string `json:"last_error,omitempty"`

	// Outputs are the result URLs, when the provider returns them.
	Outputs []string `json:"outputs,omitempty"`
	// OutputsExpireAt is when the provider deletes the outputs, if known.
	OutputsExpireAt time.Time `json:"outputs_expire_at,omitzero"`
	// Custody is what Pollux kept of the outputs (a route's
	// keep_outputs) and whether it warned they were expiring unsaved;
	// nil when neither happened.
	Custody *Custody `json:"custody,omitempty"`
	// Late records a terminal observation that arrived after the job was
	// already terminal in another state (a success after the deadline).
	Late *Late `json:"late,omitempty"`

	// EventSeq is the sequence number of the job's latest event.
	EventSeq uint64 `json:"event_seq"`
	// Outbox holds events written but not yet known to be published.
	Outbox []OutboxEvent `json:"outbox,omitempty"`
	// UpdatedAt is the time of the latest write.
	UpdatedAt time.Time `json:"updated_at"`
}

// MaxDeliveries bounds Job.Deliveries.
const MaxDeliveries = 16

// Delivered records a webhook delivery as applied and reports false when it
// was applied before.
func (j *Job) Delivered(id string) bool {
	if slices.Contains(j.Deliveries, id) {
		return false
	}
	j.Deliveries = append(j.Deliveries, id)
	if len(j.Deliveries) > MaxDeliveries {
		j.Deliveries = j.Deliveries[len(j.Deliveries)-MaxDeliveries:]
	}
	j.Webhooks++
	return true
}

// Late is a terminal observation that came after the job was terminal.
type Late struct {
	State  State     `json:"state"`
	Raw    string    `json:"provider_status,omitempty"`
	At     time.Time `json:"at"`
	Source Source    `json:"source"`
}

// OutboxEvent is an event recorded in a job's outbox.
type OutboxEvent struct {
	// Seq is the event's per-job sequence number.
	Seq uint64 `json:"seq"`
	// Type is the event type (see package events).
	Type string `json:"type"`
	// State is the job's state when the event happened.
	State State `json:"state"`
	// At is when the event happened.
	At time.Time `json:"at"`
}

// Record appends an event of type typ to the job's outbox.
func (j *Job) Record(typ string, at time.Time) {
	j.EventSeq++
	j.Outbox = append(j.Outbox, OutboxEvent{Seq: j.EventSeq, Type: typ, State: j.State, At: at})
}

// Published removes the outbox entries with sequence numbers up to seq and
// reports whether any were removed.
func (j *Job) Published(seq uint64) bool {
	n := 0
	for _, p := range j.Outbox {
		if p.Seq > seq {
			j.Outbox[n] = p
			n++
		}
	}
	removed := n != len(j.Outbox)
	j.Outbox = j.Outbox[:n]
	if len(j.Outbox) == 0 {
		j.Outbox = nil
	}
	return removed
}

// Snapshot returns the job as the world sees it — events carry it, the
// front door and `pollux get` show it: a copy without the fields internal
// to Pollux (the submission input, the outbox and the trace context), and
// without next_check_at once the job has finished (no check is due then;
// the record keeps the last one's time).
func (j *Job) Snapshot() *Job {
	c := *j
	c.Input, c.KeepInput = nil, false
	c.Outbox = nil
	c.Trace = "" // events carry their span's in a header instead
	if c.State.Terminal() {
		c.NextCheckAt = time.Time{}
	}
	return &c
}

// Duration is a time.Duration that encodes to JSON as seconds.
type Duration time.Duration

// MarshalJSON encodes d as a number of seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Seconds())
}

// UnmarshalJSON decodes a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*d = Duration(s * float64(time.Second))
	return nil
}

// Slot is a running slot a job holds: the budget scope it counts against
// (a route's name, "account~<name>", "~global") and the sequence of its
// message in that scope's stream (0 when not known).
type Slot struct {
	Scope string `json:"scope"`
	Seq   uint64 `json:"seq,omitempty"`
}

// HoldsSlot reports whether the job holds a running slot in scope.
func (j *Job) HoldsSlot(scope string) bool {
	for _, s := range j.Slots {
		if s.Scope == scope {
			return true
		}
	}
	return false
}

// Routing is how a model route chose a job's provider route, and why.
type Routing struct {
	// Via is the model route the job was submitted to.
	Via string `json:"via"`
	// Why says the choice in a sentence.
	Why string `json:"why"`
	// Candidates are the members as they stood at the choice, best first.
	Candidates []Candidate `json:"candidates"`
	// Hedge is true when the model route may hedge the job: its input is
	// kept until it ends, for the hedge.
	Hedge bool `json:"hedge,omitempty"`
	// HedgeOf, on a hedge, is the job it hedges; HedgedBy, on a hedged
	// job, its hedge, and HedgeTo the route it went to.
	HedgeOf  string `json:"hedge_of,omitempty"`
	HedgedBy string `json:"hedged_by,omitempty"`
	HedgeTo  string `json:"hedge_to,omitempty"`
}

// Candidate is one member of a model route at a choice.
type Candidate struct {
	// Route and Model are the member.
	Route string `json:"route"`
	Model string `json:"model"`
	// P90 is its learned 90th percentile of completion time; absent when
	// not learned yet.
	P90 Duration `json:"p90,omitempty"`
	// FailureRate is the share of its recent jobs that failed, were
	// lost or expired at their deadline.
	FailureRate float64 `json:"failure_rate"`
	// OnTime is the learned chance it ends the job by its deadline;
	// absent when not learned.
	OnTime *float64 `json:"on_time,omitempty"`
	// Paused and Waiting: the route is paused, or its running slots are
	// taken and jobs wait for them.
	Paused  bool `json:"paused,omitempty"`
	Waiting bool `json:"waiting,omitempty"`
	// Score is the expected seconds to a successful end, penalties
	// included; lower is better.
	Score float64 `json:"score"`
}
