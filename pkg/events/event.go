package events

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Event types. A job's state changes are named after the new state.
const (
	// EventSubmitted: the job has a remote id and Pollux tracks it (after a
	// submit, or when a track request is accepted).
	EventSubmitted = "submitted"
	// EventWaiting: the job is stored but waits before its submission —
	// its route is paused, its running slots are all taken, others queue
	// before it — and job.waiting_for says for what. It comes before
	// submitted (again when what it waits for changes); a cancel ends
	// such a job at once, without a create. Its state is pending.
	EventWaiting = "waiting"

	EventQueued  = string(state.Queued)
	EventRunning = string(state.Running)
	// EventProgress: new progress or queue position while queued or running.
	EventProgress  = state.EventProgress
	EventSucceeded = string(state.Succeeded)
	EventFailed    = string(state.Failed)
	EventCanceled  = string(state.Canceled)
	EventExpired   = string(state.Expired)
	EventLost      = string(state.Lost)
	// EventRejected: an intake message was refused; nothing else happened.
	EventRejected = "rejected"
	// EventOutputsSaved: Pollux copied a succeeded job's outputs into its
	// outputs bucket (the route's keep_outputs); the job's custody says,
	// per output, what was kept or why not. It follows the terminal event.
	EventOutputsSaved = "outputs_saved"
	// EventOutputsExpiring: a succeeded job's outputs expire at the
	// provider soon (outputs_expire_at) and are not saved. It follows the
	// terminal event, at most once per job.
	EventOutputsExpiring = "outputs_expiring"
)

// EventTypes lists every event type.
var EventTypes = []string{
	EventWaiting, EventSubmitted, EventQueued, EventRunning, EventProgress, EventSucceeded,
	EventFailed, EventCanceled, EventExpired, EventLost, EventRejected,
	EventOutputsSaved, EventOutputsExpiring,
}

// CustodyEvent reports whether an event type is one of a job's custody
// events (outputs_saved, outputs_expiring): they come after the job's
// terminal event and carry its terminal state, so a reader waiting for a
// job's end stops at the first event of a terminal state that is not one.
func CustodyEvent(typ string) bool {
	return typ == EventOutputsSaved || typ == EventOutputsExpiring
}

// Event is published on a job's event subject for every transition, and for
// every rejected intake message.
type Event struct {
	// V is the contract version (1).
	V int `json:"v"`
	// Type is one of EventTypes.
	Type string `json:"type"`
	// Seq numbers a job's events from 1 without gaps; 0 on rejections.
	// Consumers use it to drop duplicates and see order.
	Seq uint64 `json:"seq"`
	// Time is when the event happened.
	Time time.Time `json:"time"`
	// Route and JobID repeat the subject's tokens.
	Route string `json:"route"`
	JobID string `json:"job_id"`
	// State is the job's state right after the event.
	State state.State `json:"state,omitempty"`
	// Job is the job's record when the event was published.
	Job *state.Job `json:"job,omitempty"`
	// Rejection says what was wrong with a rejected intake message.
	Rejection *Rejection `json:"rejection,omitempty"`
}

// Rejection describes a refused intake message.
type Rejection struct {
	// Kind is the intake kind (submit, track, cancel).
	Kind string `json:"kind"`
	// Subject is the subject the message was published to.
	Subject string `json:"subject"`
	// IntakeSeq is the message's intake stream sequence.
	IntakeSeq uint64 `json:"intake_seq,omitempty"`
	// Field names the offending field, "" for the message as a whole.
	Field string `json:"field,omitempty"`
	// Error is the full explanation.
	Error string `json:"error"`
	// App is the app the refused message named ("" for none, or a
	// message too broken to say): an app's readers see its own
	// rejections only.
	App string `json:"app,omitempty"`
	// Budget is the app's limit that refused a submission (Field "app"),
	// nil for any other refusal.
	Budget *RejectedBudget `json:"budget,omitempty"`
}

// RejectedBudget is the limit that refused a submission: a spend budget
// of its app (Period day or month) or its cap on jobs waiting (Period
// waiting: Budget and Spent are the cap, and it has no reset).
type RejectedBudget struct {
	// Of is whose limit it is: "app <name>", "route <name>" or "account
	// <name>" (a route's and an account's hold their jobs whichever apps
	// they are).
	Of string `json:"of"`
	// Period is day, month or waiting.
	Period string `json:"period"`
	// Budget is the limit, Spent what it counts so far (estimates of jobs
	// under way included), Estimate the refused job's estimate.
	Budget   float64 `json:"budget"`
	Spent    float64 `json:"spent"`
	Estimate float64 `json:"estimate,omitempty"`
	// ResetsAt is when the period ends (UTC).
	ResetsAt time.Time `json:"resets_at,omitzero"`
}

// Field is the submission's field the limit is of: app for an app's,
// route for a route's or its account's.
func (b *RejectedBudget) Field() string {
	if strings.HasPrefix(b.Of, LevelApp+" ") {
		return "app"
	}
	return "route"
}

// PeriodWaiting is a RejectedBudget's Period (and the front door's
// problem budget's) of a create past its app's max_waiting.
const PeriodWaiting = "waiting"

// MsgID is the Nats-Msg-Id of a job's event seq, so republishing an event
// after a crash is dropped as a duplicate by the stream.
func MsgID(job string, seq uint64) string {
	return fmt.Sprintf("%s:%d", job, seq)
}

// NewEvent builds the event for an outbox entry of job.
func NewEvent(j *state.Job, p state.OutboxEvent) *Event {
	typ := p.Type
	return &Event{
		V: Version, Type: typ, Seq: p.Seq, Time: p.At.UTC(),
		Route: j.Route, JobID: j.ID, State: p.State, Job: j.Snapshot(),
	}
}

// Encode marshals an event.
func (e *Event) Encode() ([]byte, error) {
	return json.Marshal(e)
}

// DecodeEvent parses an event.
func DecodeEvent(data []byte) (*Event, error) {
	var e Event
	if err := decode(data, &e); err != nil {
		return nil, err
	}
	if err := checkVersion(e.V); err != nil {
		return nil, err
	}
	switch {
	case e.Type == "":
		return nil, fieldErr("type", "required")
	case e.JobID == "":
		// A route's event (RouteEvent) shares the stream, not the shape.
		return nil, fieldErr("job_id", "required (an event of a route, not of a job, is a RouteEvent)")
	}
	return &e, nil
}

// Route event types: an operator paused or resumed a route; a model's
// recent jobs began, or ceased, to take a different time than Pollux
// learned (its schedule follows within a few dozen jobs either way).
const (
	EventRoutePaused     = "route_paused"
	EventRouteResumed    = "route_resumed"
	EventModelDrift      = "model_drift"
	EventModelDriftEnded = "model_drift_ended"
)

// RouteEventTypes lists every route event type.
var RouteEventTypes = []string{EventRoutePaused, EventRouteResumed, EventModelDrift, EventModelDriftEnded}

// Drift is what a model_drift or model_drift_ended event says of a model.
type Drift struct {
	// Model and ConfigKey name the learned durations that drifted.
	Model     string `json:"model"`
	ConfigKey string `json:"config_key,omitempty"`
	// Ratio is the recent jobs' median duration over the learned median:
	// 1.8 is 1.8× slower, 0.5 twice as fast.
	Ratio float64 `json:"ratio"`
	// LearnedP50 is the learned median; RecentP50 the median of the last
	// RecentJobs jobs. Seconds, acceptance to end.
	LearnedP50 float64 `json:"learned_p50_s"`
	RecentP50  float64 `json:"recent_p50_s"`
	RecentJobs int     `json:"recent_jobs"`
}

// RouteEvent is published on a route's event subject (Namespace.RouteEvent,
// "<prefix>.events.<route>", in the events stream beside its jobs' events)
// when an operator pauses or resumes the route, and when one of its
// models drifts.
type RouteEvent struct {
	// V is the contract version (1).
	V int `json:"v"`
	// Type is one of RouteEventTypes.
	Type string `json:"type"`
	// Time is when it happened.
	Time time.Time `json:"time"`
	// Route repeats the subject's token.
	Route string `json:"route"`
	// By names the operator ("pollux" for a drift), Reason says why.
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	// Until is a pause's end (absent: until resumed).
	Until time.Time `json:"until,omitzero"`
	// Drift is the model of a model_drift or model_drift_ended event.
	Drift *Drift `json:"drift,omitempty"`
}

// DecodeRouteEvent parses and validates a route's event.
func DecodeRouteEvent(data []byte) (*RouteEvent, error) {
	var e RouteEvent
	if err := decode(data, &e); err != nil {
		return nil, err
	}
	if err := checkVersion(e.V); err != nil {
		return nil, err
	}
	drift := e.Type == EventModelDrift || e.Type == EventModelDriftEnded
	switch {
	case !slices.Contains(RouteEventTypes, e.Type):
		return nil, fieldErr("type", "must be one of %s", strings.Join(RouteEventTypes, ", "))
	case drift && (e.Drift == nil || e.Drift.Model == "" || !(e.Drift.Ratio > 0)):
		return nil, fieldErr("drift", "required with %s: model and a positive ratio", e.Type)
	case !drift && e.Drift != nil:
		return nil, fieldErr("drift", "only with %s or %s", EventModelDrift, EventModelDriftEnded)
	case !ValidToken(e.Route):
		return nil, fieldErr("route", "must be a route name")
	case e.By == "":
		return nil, fieldErr("by", "required")
	case len(e.By) > MaxOperatorLen:
		return nil, fieldErr("by", "at most %d bytes", MaxOperatorLen)
	case len(e.Reason) > MaxReasonLen:
		return nil, fieldErr("reason", "at most %d bytes", MaxReasonLen)
	}
	return &e, nil
}

// MaxOperatorLen bounds the name of who paused or resumed a route.
const MaxOperatorLen = 128
