package fal

import (
	"encoding/hex"
	"net/http"
	"time"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/state"
)

// fal's queue statuses.
const (
	inQueue    = "IN_QUEUE"
	inProgress = "IN_PROGRESS"
	completed  = "COMPLETED"
)

// requestIDHeader is the header the fal client reads a result's request
// id from.
const requestIDHeader = "x-fal-request-id"

// errorTypeHeader carries a request error's error_type.
const errorTypeHeader = faceshape.FalErrorTypeHeader

// uuid formats 16 id bytes as a version 4 UUID, as fal's request ids look.
func uuid(b []byte) string {
	var u [16]byte
	copy(u[:], b)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// queueURL is https://queue.fal.run/{app}/requests/{id}{suffix}: the URL
// the fal client builds itself, so a submit's URLs are the ones it uses.
func queueURL(app, id, suffix string) string {
	return "https://" + QueueHost + "/" + app + "/requests/" + id + suffix
}

// submitted is a submit's answer.
type submitted struct {
	RequestID        string `json:"request_id"`
	GatewayRequestID string `json:"gateway_request_id,omitempty"`
	ResponseURL      string `json:"response_url"`
	StatusURL        string `json:"status_url"`
	CancelURL        string `json:"cancel_url"`
	Status           string `json:"status"`
	QueuePosition    int    `json:"queue_position"`
}

// status is a status answer.
type status struct {
	Status        string         `json:"status"`
	RequestID     string         `json:"request_id"`
	ResponseURL   string         `json:"response_url"`
	QueuePosition *int           `json:"queue_position,omitempty"`
	Logs          []logLine      `json:"logs"`
	Metrics       map[string]any `json:"metrics,omitempty"`
	Error         string         `json:"error,omitempty"`
	ErrorType     string         `json:"error_type,omitempty"`
}

// logLine is one of a status's logs.
type logLine struct {
	Message   string `json:"message"`
	Level     string `json:"level"`
	Source    string `json:"source"`
	Timestamp string `json:"timestamp"`
}

// statusOf is job j's status as fal reports it: IN_QUEUE until the
// provider runs it, IN_PROGRESS while it runs, COMPLETED once it has
// ended whatever the outcome — the fal client stops polling on
// COMPLETED alone and learns an outcome from the result call, so a
// failed, canceled, expired or lost job is COMPLETED with error and
// error_type here, and its result answers the error.
func statusOf(j *state.Job, app string, logs bool) (status, int) {
	s := status{RequestID: j.ID, ResponseURL: queueURL(app, j.ID, "")}
	if logs {
		s.Logs = []logLine{}
		if j.WaitingFor != "" {
			s.Logs = append(s.Logs, logLine{Message: "waiting: " + j.WaitingFor, Level: "INFO", Source: "pollux",
				Timestamp: j.UpdatedAt.UTC().Format(time.RFC3339Nano)})
		}
	}
	switch {
	case j.State.Terminal():
		s.Status = completed
		if !j.StartedAt.IsZero() && j.CompletedAt.After(j.StartedAt) {
			s.Metrics = map[string]any{"inference_time": j.CompletedAt.Sub(j.StartedAt).Seconds()}
		} else {
			s.Metrics = map[string]any{}
		}
		if f := failureOf(j); f != nil {
			s.Error, s.ErrorType = f.Message, f.Code
		}
		return s, http.StatusOK
	case j.State == state.Running:
		s.Status = inProgress
	default:
		s.Status = inQueue
		pos := 0 // fal counts the requests ahead; Pollux's position is 1-based
		if j.QueuePosition != nil && *j.QueuePosition > 0 {
			pos = *j.QueuePosition - 1
		}
		s.QueuePosition = &pos
	}
	return s, http.StatusAccepted
}

// failureOf is the error a result call answers for job j, which has
// ended (faceshape.FalFailureOf, as the webhook's payload says it); nil
// when it succeeded.
func failureOf(j *state.Job) *face.Error {
	f := faceshape.FalFailureOf(j)
	if f == nil {
		return nil
	}
	e := &face.Error{Status: f.Status, Code: f.Type, Message: f.Message, Field: f.Field, Header: http.Header{}}
	if f.UserTimeout {
		e.Header.Set("X-Fal-Request-Timeout-Type", "user")
	}
	if f.Type != "" {
		e.Header.Set(errorTypeHeader, f.Type)
	}
	return e
}

// WriteError writes e in fal's shape (faceshape.FalErrorBody): a 400
// (or 422) naming a field is a 422 validation error whose detail lists
// it; any other error is {"detail": message}, with Retry-After when e
// says.
func (f *Face) WriteError(w http.ResponseWriter, e *face.Error) {
	h := w.Header()
	e.SetHeaders(h)
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	status, body := faceshape.FalErrorBody(e.Status, e.Field, msg, h.Get(errorTypeHeader))
	_ = face.WriteJSON(w, status, body) // a FalError always encodes
}
