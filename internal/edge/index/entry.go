package index

import (
	"cmp"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Entry is what the index holds of one job: the fields lists filter and
// show, from the job's latest event.
type Entry struct {
	// ID, Route, Model, RemoteID, IdempotencyKey, State and Tracked are
	// the job record's (state.Job), as are Polls, Progress, QueuePosition
	// and Reason below.
	ID             string      `json:"id"`
	Route          string      `json:"route"`
	Model          string      `json:"model,omitempty"`
	RemoteID       string      `json:"remote_id,omitempty"`
	IdempotencyKey string      `json:"idempotency_key,omitempty"`
	State          state.State `json:"state,omitempty"`
	Tracked        bool        `json:"tracked,omitempty"`
	// CreatedAt is when Pollux accepted the job (a rejection's: when the
	// message was refused); UpdatedAt is the time of its latest event.
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	Polls         int       `json:"polls"`
	Progress      *float64  `json:"progress,omitempty"`
	QueuePosition *int      `json:"queue_position,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	// WaitingFor says why a pending job waits before its submission (its
	// route is paused, its running slots are taken: state.Job.WaitingFor).
	WaitingFor string `json:"waiting_for,omitempty"`
	// App is the app the job belongs to (state.Job.App).
	App string `json:"app,omitempty"`
	// Rejected marks a refused intake message (its event's Rejection);
	// RejectionError says why. A rejected entry has no State.
	Rejected bool `json:"rejected,omitempty"`
	// face is the provider face that made the job (its record's metadata
	// "face"): 1 + its place in face.Kinds, 0 for none. A byte beside a
	// bool, so it takes no room of its own in an index of millions
	// (Face).
	face           uint8
	RejectionError string `json:"rejection_error,omitempty"`
	// Seq is the job's event sequence number the entry reflects (0 for a
	// rejection).
	Seq uint64 `json:"seq"`
	// Stream is the events stream's sequence of the message the entry
	// reflects: the id of the live stream's event (GET /v1/stream), from
	// which a client resumes (ChangedSince).
	Stream uint64 `json:"-"`
}

// entryOf returns the entry event ev, at stream sequence seq, carries.
func entryOf(ev *event, seq uint64) Entry {
	e := Entry{ID: ev.JobID, Route: ev.Route, State: ev.State, UpdatedAt: ev.Time, CreatedAt: ev.Time, Seq: ev.Seq, Stream: seq}
	if j := ev.Job; j != nil {
		e.Model, e.RemoteID, e.IdempotencyKey = j.Model, j.RemoteID, j.IdempotencyKey
		e.Tracked, e.Polls, e.Progress, e.QueuePosition, e.Reason = j.Tracked, j.Polls, j.Progress, j.QueuePosition, j.Reason
		e.WaitingFor = j.WaitingFor
		e.face = faceOf(j.Metadata.Face)
		e.App = j.App
		if !j.CreatedAt.IsZero() {
			e.CreatedAt = j.CreatedAt
		}
		if e.State == "" {
			e.State = j.State
		}
	}
	if ev.Reject != nil || ev.Type == events.EventRejected {
		e.Rejected, e.State = true, ""
		if ev.Reject != nil {
			e.RejectionError = ev.Reject.Error
			e.App = cmp.Or(e.App, ev.Reject.App)
		}
	}
	return e
}

// faceOf is Entry.face of the face named v (0 when v names none).
func faceOf(v string) uint8 {
	for i, k := range face.Kinds {
		if string(k) == v {
			return uint8(i + 1)
		}
	}
	return 0
}

// Face is the provider face that made the job ("" for none: made over
// NATS or POST /v1/jobs).
func (e Entry) Face() face.Kind {
	if e.face == 0 {
		return ""
	}
	return face.Kinds[e.face-1]
}
