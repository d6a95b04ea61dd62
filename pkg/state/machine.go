package state

import (
	"fmt"
	"math"
	"time"
)

// EventProgress is the type of the event recorded when a queued or running
// job reports new progress or a new queue position. State changes record an
// event named after the new state.
const EventProgress = "progress"

// progressStep is the smallest progress change worth an event.
const progressStep = 0.01

// Transition reports whether a job may move from one state to another:
// nil when it may, ErrTerminal when from absorbs, ErrRegress when to lies
// behind from, and an error naming the value when either is not a state.
// Moving to the same non-terminal state is allowed (progress).
func Transition(from, to State) error {
	switch {
	case !from.Valid():
		return fmt.Errorf("state %q: %w", from, ErrInvalidState)
	case !to.Valid():
		return fmt.Errorf("state %q: %w", to, ErrInvalidState)
	case from.Terminal():
		return ErrTerminal
	case to.rank() < from.rank():
		return ErrRegress
	}
	return nil
}

// Observation is what Pollux learned about a job at one moment, from a status
// call, a webhook, a cancel response or its own decision.
type Observation struct {
	// State is the normalized state; Unknown when the provider's value
	// cannot be mapped.
	State State
	// Raw is the provider's own status value.
	Raw string
	// Progress in [0, 1], if reported.
	Progress *float64
	// QueuePosition, if reported.
	QueuePosition *int
	// CreatedAt, StartedAt and CompletedAt are the provider's own times,
	// zero when it does not give them.
	CreatedAt   time.Time
	StartedAt   time.Time
	CompletedAt time.Time
	// Reason explains a failure, cancellation, expiry or loss.
	Reason string
	// Outputs are result URLs and OutputsExpireAt when they expire.
	Outputs         []string
	OutputsExpireAt time.Time
	// Source says how the observation was made.
	Source Source
	// At is when Pollux made the observation.
	At time.Time
}

// Apply merges an observation into the job and returns the type of the event
// it recorded in the outbox, or "" when it changed nothing others need to
// hear about. Terminal states absorb (a later terminal observation is kept in
// Late), backwards moves are ignored, and unmapped values only update the raw
// provider status.
func (j *Job) Apply(o Observation) string {
	if j.State.Terminal() {
		if o.State.Terminal() && o.State != j.State && j.Late == nil {
			j.Late = &Late{State: o.State, Raw: o.Raw, At: o.At, Source: o.Source}
		}
		return ""
	}
	if o.State == Unknown || o.State == "" {
		if o.Raw != "" {
			j.ProviderStatus = o.Raw
		}
		return ""
	}
	if err := Transition(j.State, o.State); err != nil {
		return ""
	}
	if o.State == Canceled && j.canceledAtDeadline(o) {
		o.State = Expired
		o.Reason = "canceled by the provider at the job's deadline"
	}
	if o.Raw != "" {
		j.ProviderStatus = o.Raw
	}
	if j.SubmittedAt.IsZero() && !o.CreatedAt.IsZero() {
		j.SubmittedAt = o.CreatedAt
	}
	if j.StartedAt.IsZero() {
		switch {
		case !o.StartedAt.IsZero():
			j.StartedAt = o.StartedAt
		case o.State == Running:
			j.StartedAt = o.At
		}
	}
	if len(o.Outputs) > 0 {
		j.Outputs = o.Outputs
		j.OutputsExpireAt = o.OutputsExpireAt
	}

	if o.State != j.State {
		j.State = o.State
		j.ChangedAt = o.At
		if o.Reason != "" {
			j.Reason = o.Reason
		}
		if o.State.Terminal() {
			j.CompletedAt = o.CompletedAt
			if j.CompletedAt.IsZero() {
				j.CompletedAt = o.At
			}
			j.DetectedAt = o.At
			j.DetectedBy = o.Source
			j.Progress, j.QueuePosition = finalProgress(o), nil
			if j.RemoteID != "" && !j.KeepInput {
				// The provider had it: the input is not needed again,
				// unless its route keeps inputs. A job that never reached
				// the provider (refused, in doubt, expired waiting) keeps
				// it, so it can be resubmitted.
				j.Input = nil
			}
		} else {
			j.Progress, j.QueuePosition = o.Progress, o.QueuePosition
		}
		j.Record(string(o.State), o.At)
		return string(o.State)
	}

	if progressChanged(j.Progress, o.Progress) || !samePosition(j.QueuePosition, o.QueuePosition) {
		j.Progress, j.QueuePosition = o.Progress, o.QueuePosition
		j.ChangedAt = o.At
		j.Record(EventProgress, o.At)
		return EventProgress
	}
	return ""
}

// deadlineSkew is how far from the job's deadline a cancellation by the
// provider still counts as the provider enforcing that deadline (clocks
// differ, and providers take deadlines in whole seconds).
const deadlineSkew = 2 * time.Second

// canceledAtDeadline reports whether a cancellation the submitter did not
// ask for came when the job's deadline was due: the provider enforcing the
// deadline Pollux gave it, which makes the job expired, not canceled.
func (j *Job) canceledAtDeadline(o Observation) bool {
	if !j.CancelRequestedAt.IsZero() || j.Deadline.IsZero() {
		return false
	}
	at := o.CompletedAt
	if at.IsZero() {
		at = o.At
	}
	return !at.Before(j.Deadline.Add(-deadlineSkew))
}

func finalProgress(o Observation) *float64 {
	if o.State == Succeeded {
		one := 1.0
		return &one
	}
	return o.Progress
}

func progressChanged(old, cur *float64) bool {
	switch {
	case cur == nil:
		return false
	case old == nil:
		return true
	}
	return math.Abs(*cur-*old) >= progressStep
}

func samePosition(old, cur *int) bool {
	switch {
	case cur == nil:
		return true // no news is not a change
	case old == nil:
		return false
	}
	return *old == *cur
}
