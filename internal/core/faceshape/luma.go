package faceshape

import (
	"encoding/json"
	"time"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Metadata a Luma face's create writes on its job: the model and the kind
// of generation (video or image) it asked for, and, when it named a
// callback_url, the face's absolute URL, which the callbacks' output URLs
// are made of.
const (
	FaceLuma      = "luma"
	MetaLumaModel = "luma_model"
	MetaLumaType  = "luma_type"
	MetaLumaBase  = "luma_base"
)

// LumaGeneration is Luma's generation object, as the lumaai SDK reads it
// and as Luma's callbacks carry it.
type LumaGeneration struct {
	ID             string          `json:"id"`
	GenerationType string          `json:"generation_type"`
	State          string          `json:"state"`
	FailureReason  *string         `json:"failure_reason"`
	CreatedAt      string          `json:"created_at"`
	Assets         *LumaAssets     `json:"assets"`
	Model          string          `json:"model"`
	Request        json.RawMessage `json:"request,omitempty"`
}

// LumaAssets are a completed generation's outputs.
type LumaAssets struct {
	Video string `json:"video,omitempty"`
	Image string `json:"image,omitempty"`
}

// LumaGenerationOf is job j as a Luma generation: queued until it runs,
// dreaming while it does, completed with its asset (OutputURL of base and
// routeKeeps), or failed with why.
func LumaGenerationOf(j *state.Job, base string, routeKeeps bool) LumaGeneration {
	g := LumaGeneration{ID: j.ID, GenerationType: j.Metadata[MetaLumaType], CreatedAt: j.CreatedAt.UTC().Format(time.RFC3339Nano),
		Model: j.Metadata[MetaLumaModel], Request: j.Input, State: LumaState(j.State)}
	switch j.State {
	case state.Succeeded:
		g.Assets = &LumaAssets{}
		if u, ok := OutputURL(j, base, 0, routeKeeps); ok && g.GenerationType == "image" {
			g.Assets.Image = u
		} else if ok {
			g.Assets.Video = u
		}
	case state.Failed, state.Canceled, state.Expired, state.Lost:
		reason := j.Reason
		if reason == "" {
			reason = "the generation ended " + string(j.State)
		}
		g.FailureReason = &reason
	}
	return g
}

// LumaState is Luma's state of a job in state s.
func LumaState(s state.State) string {
	switch s {
	case state.Pending, state.Queued:
		return "queued"
	case state.Running:
		return "dreaming"
	case state.Succeeded:
		return "completed"
	}
	return "failed"
}

// LumaHook reports whether job j was made by the Luma face with a
// callback_url: its deliveries carry the generation, not Pollux's event.
func LumaHook(j *state.Job) bool {
	return j != nil && j.Metadata[MetaFace] == FaceLuma && j.Metadata[MetaLumaBase] != ""
}

// LumaWants reports whether a Luma callback is sent for a job event of
// type typ: as Luma calls back on each state change — the generation
// taken (queued), running (dreaming), ended (completed or failed); a
// queued or progress event changes no state Luma shows.
func LumaWants(typ string) bool {
	switch typ {
	case events.EventSubmitted, events.EventRunning,
		events.EventSucceeded, events.EventFailed, events.EventCanceled, events.EventExpired, events.EventLost:
		return true
	}
	return false
}

// LumaCallbackBody is the body of a Luma callback about job j: the
// generation as the face answers it, routeKeeps being the route's
// keep_outputs (OutputURL).
func LumaCallbackBody(j *state.Job, routeKeeps bool) ([]byte, error) {
	return json.Marshal(LumaGenerationOf(j, j.Metadata[MetaLumaBase], routeKeeps))
}
