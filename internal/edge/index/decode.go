package index

import (
	"errors"
	"fmt"
	"time"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// event is the part of a job's event (events.Event) the index reads.
// Replay decodes every event in the stream, so it decodes only these
// fields, with segmentio's decoder (the standard library's semantics,
// several times faster; as events.DecodeCheck does), and checks what
// events.DecodeEvent checks.
type event struct {
	V      int         `json:"v"`
	Type   string      `json:"type"`
	Seq    uint64      `json:"seq"`
	Time   time.Time   `json:"time"`
	Route  string      `json:"route"`
	JobID  string      `json:"job_id"`
	State  state.State `json:"state"`
	Job    *snapshot   `json:"job"`
	Reject *struct {
		Error string `json:"error"`
		App   string `json:"app"`
	} `json:"rejection"`
}

// snapshot is the part of the job record (state.Job) the index reads.
type snapshot struct {
	Model          string       `json:"model"`
	RemoteID       string       `json:"remote_id"`
	IdempotencyKey string       `json:"idempotency_key"`
	State          state.State  `json:"state"`
	Reason         string       `json:"reason"`
	WaitingFor     string       `json:"waiting_for"`
	Progress       *float64     `json:"progress"`
	QueuePosition  *int         `json:"queue_position"`
	Tracked        bool         `json:"tracked"`
	Polls          int          `json:"polls"`
	CreatedAt      time.Time    `json:"created_at"`
	CompletedAt    time.Time    `json:"completed_at"`
	DetectedAt     time.Time    `json:"detected_at"`
	DetectedBy     state.Source `json:"detected_by"`
	// WebhookExpected is whether the job asked for a webhook.
	WebhookExpected bool `json:"webhook_expected"`
	// App is the app the job belongs to.
	App string `json:"app"`
	// Metadata is read for the face that made the job only.
	Metadata struct {
		Face string `json:"face"`
	} `json:"metadata"`
}

// decodeEvent parses a job's event.
func decodeEvent(data []byte) (*event, error) {
	if len(data) > events.MaxMessageBytes {
		return nil, fmt.Errorf("event of %d bytes, larger than the %d allowed", len(data), events.MaxMessageBytes)
	}
	var e event
	if err := fastjson.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("not an event: %w", err)
	}
	switch {
	case e.V != events.Version:
		return nil, fmt.Errorf("v: version %d, not %d", e.V, events.Version)
	case e.Type == "":
		return nil, errors.New("type: required")
	case e.JobID == "":
		return nil, errors.New("job_id: required")
	}
	return &e, nil
}
