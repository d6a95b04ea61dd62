package faceshape

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Replicate's webhook events (webhook_events_filter).
const (
	ReplicateStart     = "start"
	ReplicateOutput    = "output"
	ReplicateLogs      = "logs"
	ReplicateCompleted = "completed"
)

// ReplicateEvents are Replicate's webhook events, in the order a
// prediction has them; a create naming none gets them all.
var ReplicateEvents = []string{ReplicateStart, ReplicateOutput, ReplicateLogs, ReplicateCompleted}

// Metadata a Replicate create with a webhook writes on its job: the
// events it asked for (comma-separated, ReplicateFilter) and the face's
// absolute URL, which the prediction's urls and Pollux's output URLs are
// made of.
const (
	MetaFace                  = "face"
	FaceReplicate             = "replicate"
	MetaReplicateWebhookEvent = "replicate_webhook_events"
	MetaReplicateBase         = "replicate_base"
)

// ReplicateFilter checks a create's webhook_events_filter and gives the
// metadata value that records it: every event when it names none.
func ReplicateFilter(filter []string) (string, error) {
	if len(filter) == 0 {
		return strings.Join(ReplicateEvents, ","), nil
	}
	if len(filter) > len(ReplicateEvents) {
		return "", fmt.Errorf("at most %d events", len(ReplicateEvents))
	}
	var out []string
	for _, e := range ReplicateEvents {
		if slices.Contains(filter, e) {
			out = append(out, e)
		}
	}
	for _, e := range filter {
		if !slices.Contains(ReplicateEvents, e) {
			return "", fmt.Errorf("%q is not one of %s", e, strings.Join(ReplicateEvents, ", "))
		}
	}
	return strings.Join(out, ","), nil
}

// ReplicateHook reports whether job j was made by the Replicate face with
// a webhook: its deliveries carry the prediction, not Pollux's event.
func ReplicateHook(j *state.Job) bool {
	return j != nil && j.Metadata[MetaFace] == FaceReplicate && j.Metadata[MetaReplicateWebhookEvent] != ""
}

// ReplicateEvent is the Replicate webhook event a Pollux job event is, ""
// when it is none: the provider taking the job is start; running,
// queue position and progress are logs (the prediction's logs say them);
// the job's end is completed. Pollux learns a job's outputs when it ends,
// so an output event is the job's success, delivered once with completed.
func ReplicateEvent(typ string) string {
	switch typ {
	case events.EventSubmitted:
		return ReplicateStart
	case events.EventQueued, events.EventRunning, events.EventProgress:
		return ReplicateLogs
	case events.EventSucceeded, events.EventFailed, events.EventCanceled, events.EventExpired, events.EventLost:
		return ReplicateCompleted
	}
	return ""
}

// ReplicateWants reports whether job j's webhook is to get a delivery for
// event ev (its type and the job's state after it), by the filter the
// create recorded: a success is delivered when the filter has output or
// completed, any other end when it has completed.
func ReplicateWants(j *state.Job, typ string) bool {
	filter := strings.Split(j.Metadata[MetaReplicateWebhookEvent], ",")
	switch e := ReplicateEvent(typ); {
	case e == "":
		return false
	case typ == events.EventSucceeded:
		return slices.Contains(filter, ReplicateCompleted) || slices.Contains(filter, ReplicateOutput)
	default:
		return slices.Contains(filter, e)
	}
}

// ReplicateWebhookBody is the body of a Replicate webhook delivery about
// job j: the prediction as the face answers it, routeKeeps being the
// route's keep_outputs (OutputURL).
func ReplicateWebhookBody(j *state.Job, routeKeeps bool) ([]byte, error) {
	base := j.Metadata[MetaReplicateBase]
	var outs []string
	for n := range j.Outputs {
		if u, ok := OutputURL(j, base, n, routeKeeps); ok {
			outs = append(outs, u)
		}
	}
	return json.Marshal(PredictionOf(j, base, nil, outs))
}
