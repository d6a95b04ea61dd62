package faceshape

import (
	"encoding/json"
	"strconv"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// fal's webhook statuses.
const (
	FalHookOK    = "OK"
	FalHookError = "ERROR"
)

// FalNoApp is the X-Fal-Webhook-User-Id of a job of no app (one made by
// a token that sees every app, or on a front door without tokens): "*",
// which no app's name can be.
const FalNoApp = "*"

// FalWebhook is the body of a fal webhook delivery: the request, the
// outcome (OK or ERROR), and the payload — what the request's result
// call answers, its result or its error body. error says an ERROR's
// status as fal does ("Invalid status code: 422"); payload_error is
// fal's when a payload cannot be serialized, which Pollux's always can.
type FalWebhook struct {
	RequestID        string  `json:"request_id"`
	GatewayRequestID string  `json:"gateway_request_id"`
	Status           string  `json:"status"`
	Payload          any     `json:"payload"`
	Error            *string `json:"error,omitempty"`
	PayloadError     *string `json:"payload_error,omitempty"`
}

// FalHook reports whether job j was submitted through the fal face with a
// fal_webhook: its deliveries carry fal's webhook body, not Pollux's
// event, signed as fal signs.
func FalHook(j *state.Job) bool {
	return j != nil && j.NotifyURL != "" && j.Metadata[MetaFace] == FaceFal && j.Metadata[MetaFalBase] != ""
}

// FalWants reports whether a fal webhook is to get a delivery for a job
// event of type typ: fal calls a webhook once, when the request has
// ended, so only the end is delivered.
func FalWants(typ string) bool {
	switch typ {
	case events.EventSucceeded, events.EventFailed, events.EventCanceled, events.EventExpired, events.EventLost:
		return true
	}
	return false
}

// FalUserID is the X-Fal-Webhook-User-Id of job j's deliveries: its app
// (each token belongs to one: its app= or its name), which an app's
// verifier pins as fal's user id so that no other app's delivery
// verifies; FalNoApp for a job of none.
func FalUserID(j *state.Job) string {
	if j.App == "" {
		return FalNoApp
	}
	return j.App
}

// FalWebhookBody is the body of the fal webhook delivery about job j,
// which has ended: OK with its result as the face's result call answers
// it, or ERROR with the error body that call answers; routeKeeps is the
// route's keep_outputs (OutputURL).
func FalWebhookBody(j *state.Job, routeKeeps bool) ([]byte, error) {
	h := FalWebhook{RequestID: j.ID, GatewayRequestID: j.ID, Status: FalHookOK}
	if f := FalFailureOf(j); f != nil {
		_, body := FalErrorBody(f.Status, f.Field, f.Message, f.Type)
		msg := "Invalid status code: " + strconv.Itoa(f.Status)
		h.Status, h.Error, h.Payload = FalHookError, &msg, body
	} else {
		base := j.Metadata[MetaFalBase]
		h.Payload = FalResultOf(j, func(n int) (string, bool) { return OutputURL(j, base, n, routeKeeps) })
	}
	return json.Marshal(h)
}
