package events

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Event types. A job's state changes are named after the new state.
const (
	// EventSubmitted: the job has a remote id and Pollux tracks it (after a
	// submit, or when a track request is accepted).
	EventSubmitted = "submitted"
	EventQueued    = string(state.Queued)
	EventRunning   = string(state.Running)
	// EventProgress: new progress or queue position while queued or running.
	EventProgress  = state.EventProgress
	EventSucceeded = string(state.Succeeded)
	EventFailed    = string(state.Failed)
	EventCanceled  = string(state.Canceled)
	EventExpired   = string(state.Expired)
	EventLost      = string(state.Lost)
	// EventRejected: an intake message was refused; nothing else happened.
	EventRejected = "rejected"
)

// EventTypes lists every event type.
var EventTypes = []string{
	EventSubmitted, EventQueued, EventRunning, EventProgress, EventSucceeded,
	EventFailed, EventCanceled, EventExpired, EventLost, EventRejected,
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
}

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

// Route event types: an operator paused or resumed a route.
const (
	EventRoutePaused  = "route_paused"
	EventRouteResumed = "route_resumed"
)

// RouteEvent is published on a route's event subject (Namespace.RouteEvent,
// "<prefix>.events.<route>", in the events stream beside its jobs' events)
// when an operator pauses or resumes the route.
type RouteEvent struct {
	// V is the contract version (1).
	V int `json:"v"`
	// Type is EventRoutePaused or EventRouteResumed.
	Type string `json:"type"`
	// Time is when it happened.
	Time time.Time `json:"time"`
	// Route repeats the subject's token.
	Route string `json:"route"`
	// By names the operator, Reason says why.
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	// Until is a pause's end (absent: until resumed).
	Until time.Time `json:"until,omitzero"`
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
	switch {
	case e.Type != EventRoutePaused && e.Type != EventRouteResumed:
		return nil, fieldErr("type", "must be %s or %s", EventRoutePaused, EventRouteResumed)
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
