package events

import (
	"encoding/json"
	"time"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Check is a job's poll timer: one per tracked job, on the job's check
// subject, written only by the job's owner (package jobs).
//
// Its first delivery waits until Due; each later delivery is one status
// call. It carries the job's poll state as of its publication, so a poll
// that learns nothing needs no job record: the poller calls the provider
// and sends the check back with NakWithDelay. The polls made on one check
// message since it was published are its deliveries after the first, so
// the job's poll count at any delivery is Poll.Polls plus the deliveries
// before it beyond the first; only the process holding the delivery
// knows them. A check published without poll state (by hand, or before
// poll states existed) makes the poller read the job record instead.
type Check struct {
	// V is the contract version (1).
	V int `json:"v"`
	// JobID repeats the subject's job token.
	JobID string `json:"job_id"`
	// Due is when the check's first poll is due.
	Due time.Time `json:"due,omitzero"`
	// Poll is the job's poll state; nil when the poller must read the
	// record.
	Poll *PollState `json:"poll,omitempty"`
}

// PollState is what a status poll needs of a job and what the polls so
// far have learned, as of its check's publication.
type PollState struct {
	// RemoteID and Ref reach the job at its provider.
	RemoteID string          `json:"remote_id"`
	Ref      json.RawMessage `json:"ref,omitempty"`
	// Model, ConfigKey and Length pick the learned durations.
	Model     string  `json:"model"`
	ConfigKey string  `json:"config_key,omitempty"`
	Length    float64 `json:"length_s,omitempty"`
	// Via, HedgeOf and HedgedBy are the job's state.Routing, when a model
	// route chose its route: what a poll needs to hedge it or settle a
	// hedge.
	Via      string `json:"via,omitempty"`
	HedgeOf  string `json:"hedge_of,omitempty"`
	HedgedBy string `json:"hedged_by,omitempty"`
	// State, Raw, Progress and QueuePosition are what the provider said
	// last.
	State         state.State `json:"state"`
	Raw           string      `json:"provider_status,omitempty"`
	Progress      *float64    `json:"progress,omitempty"`
	QueuePosition *int        `json:"queue_position,omitempty"`
	// CreatedAt, SubmittedAt and StartedAt date the job.
	CreatedAt   time.Time `json:"created_at"`
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	// Deadline is when the job expires.
	Deadline time.Time `json:"deadline,omitzero"`
	// Expected is the submission's expected duration.
	Expected state.Duration `json:"expected,omitempty"`
	// Webhook is true when the provider notifies the job's end. Such a
	// job is polled rarely, and every one of its polls publishes a new
	// check, so its check's Polls is exact at every moment (see package
	// jobs).
	Webhook bool `json:"webhook,omitempty"`
	// CancelRequestedAt is when a cancel was requested (zero: none).
	CancelRequestedAt time.Time `json:"cancel_requested_at,omitzero"`
	// Polls counts the job's status calls before this check; Unchanged
	// those since it last changed; Errors, NotFound and Refused the
	// consecutive failed, "unknown job" and refused ones.
	Polls     int `json:"polls"`
	Unchanged int `json:"unchanged,omitempty"`
	Errors    int `json:"errors,omitempty"`
	NotFound  int `json:"not_found,omitempty"`
	Refused   int `json:"refused,omitempty"`
	// LastPolledAt is the latest status call this state knows of.
	LastPolledAt time.Time `json:"last_polled_at,omitzero"`
	// Published is the seq up to which the job's events are known
	// published: the writer that published this check published them.
	Published uint64 `json:"published,omitempty"`
	// Trace is the job's trace context (state.Job.Trace), the parent of
	// each poll's span: a poll reads no record.
	Trace string `json:"trace,omitempty"`
}

// PollStateOf is job j's poll state as its record has it.
func PollStateOf(j *state.Job) *PollState {
	ps := pollStateOf(j)
	if r := j.Routing; r != nil {
		ps.Via, ps.HedgeOf, ps.HedgedBy = r.Via, r.HedgeOf, r.HedgedBy
	}
	return ps
}

func pollStateOf(j *state.Job) *PollState {
	return &PollState{
		RemoteID: j.RemoteID, Ref: j.ProviderRef, Model: j.Model, ConfigKey: j.ConfigKey, Length: j.Length,
		State: j.State, Raw: j.ProviderStatus, Progress: j.Progress, QueuePosition: j.QueuePosition,
		CreatedAt: j.CreatedAt, SubmittedAt: j.SubmittedAt, StartedAt: j.StartedAt, Deadline: j.Deadline,
		Expected: j.ExpectedDuration, Webhook: j.WebhookExpected, CancelRequestedAt: j.CancelRequestedAt,
		Polls: j.Polls, Unchanged: j.Unchanged, Errors: j.Errors, NotFound: j.NotFound, Refused: j.Refused,
		LastPolledAt: j.LastPolledAt, Trace: j.Trace,
	}
}

// Job returns the part of job id's record the poll state holds, for the
// state machine to apply an observation to (see state.Job.Apply).
func (p *PollState) Job(id, route string) *state.Job {
	return &state.Job{
		ID: id, Route: route, Model: p.Model, ConfigKey: p.ConfigKey, Length: p.Length, RemoteID: p.RemoteID, ProviderRef: p.Ref,
		State: p.State, ProviderStatus: p.Raw, Progress: p.Progress, QueuePosition: p.QueuePosition,
		CreatedAt: p.CreatedAt, SubmittedAt: p.SubmittedAt, StartedAt: p.StartedAt, Deadline: p.Deadline,
		ExpectedDuration: p.Expected, WebhookExpected: p.Webhook, CancelRequestedAt: p.CancelRequestedAt,
		Polls: p.Polls, Unchanged: p.Unchanged, Errors: p.Errors, NotFound: p.NotFound, Refused: p.Refused,
		LastPolledAt: p.LastPolledAt, Trace: p.Trace,
	}
}

// Learned takes back what the state machine changed in j, a job made by
// Job.
func (p *PollState) Learned(j *state.Job) {
	p.State, p.Raw, p.Progress, p.QueuePosition = j.State, j.ProviderStatus, j.Progress, j.QueuePosition
	p.SubmittedAt, p.StartedAt = j.SubmittedAt, j.StartedAt
}

// checkWire is a check as it may be stored: the fields of Check, and those
// of checks published before poll states (not_before, job).
type checkWire struct {
	V         int             `json:"v"`
	JobID     string          `json:"job_id"`
	Due       time.Time       `json:"due,omitzero"`
	Poll      *PollState      `json:"poll,omitempty"`
	NotBefore time.Time       `json:"not_before,omitzero"`
	Job       json.RawMessage `json:"job,omitempty"`
}

// DecodeCheck parses a check message. Every poll decodes one, so it uses
// segmentio's decoder: the standard library's semantics, several times
// faster. A check from before poll states decodes with its due time and
// without poll state.
func DecodeCheck(data []byte) (*Check, error) {
	if len(data) > MaxCheckBytes {
		return nil, fieldErr("", "check is %d bytes, larger than the %d allowed", len(data), MaxCheckBytes)
	}
	var m checkWire
	if err := fastjson.Unmarshal(data, &m); err != nil {
		return nil, fieldErr("", "not a check message: %v", err)
	}
	if err := checkVersion(m.V); err != nil {
		return nil, err
	}
	if !ValidToken(m.JobID) {
		return nil, fieldErr("job_id", "%s", tokenProblem(m.JobID))
	}
	if p := m.Poll; p != nil {
		switch {
		case !p.State.Valid():
			return nil, fieldErr("poll.state", "%q is not a job state", p.State)
		case p.RemoteID == "":
			return nil, fieldErr("poll.remote_id", "required in a poll state")
		case p.Polls < 0 || p.Unchanged < 0 || p.Errors < 0 || p.NotFound < 0 || p.Refused < 0:
			return nil, fieldErr("poll", "counters must not be negative")
		}
	}
	c := &Check{V: m.V, JobID: m.JobID, Due: m.Due, Poll: m.Poll}
	if c.Due.IsZero() {
		c.Due = m.NotBefore
	}
	return c, nil
}
