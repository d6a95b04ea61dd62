package openai

import (
	"cmp"
	"encoding/json"
	"math"
	"time"

	"github.com/pollux-dev/pollux/pkg/state"
)

// video is OpenAI's video object, as the SDK reads it.
type video struct {
	ID                 string      `json:"id"`
	Object             string      `json:"object"`
	Model              string      `json:"model"`
	Status             string      `json:"status"`
	Progress           int         `json:"progress"`
	CreatedAt          int64       `json:"created_at"`
	CompletedAt        *int64      `json:"completed_at"`
	ExpiresAt          *int64      `json:"expires_at"`
	Prompt             *string     `json:"prompt"`
	Seconds            string      `json:"seconds"`
	Size               string      `json:"size"`
	RemixedFromVideoID *string     `json:"remixed_from_video_id"`
	Error              *videoError `json:"error"`
}

// videoError is a failed video's error.
type videoError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// The video statuses of OpenAI's API.
const (
	statusQueued     = "queued"
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusFailed     = "failed"
)

// Metadata keys a create records on the job besides face.MetaFace, so
// that every answer about it can say what was asked for.
const (
	metaModel   = "openai_model"
	metaSeconds = "openai_seconds"
	metaSize    = "openai_size"
	metaPrompt  = "openai_prompt"
)

// The defaults of a create, as OpenAI's API has them.
const (
	defaultModel   = "sora-2"
	defaultSeconds = "4"
	defaultSize    = "720x1280"
)

// status maps a Pollux state to OpenAI's status, and for a job that ended
// without a video the error code the app sees.
func status(s state.State) (string, string) {
	switch s {
	case state.Running:
		return statusInProgress, ""
	case state.Succeeded:
		return statusCompleted, ""
	case state.Failed:
		return statusFailed, "video_generation_failed"
	case state.Canceled:
		return statusFailed, "video_canceled"
	case state.Expired:
		return statusFailed, "video_expired"
	case state.Lost:
		return statusFailed, "video_lost"
	default: // pending, queued: not yet running at the provider
		return statusQueued, ""
	}
}

// videoOf is job j as OpenAI's video object.
func videoOf(j *state.Job) video {
	v := video{
		ID:        j.ID,
		Object:    "video",
		Model:     cmp.Or(j.Metadata[metaModel], j.Model),
		CreatedAt: j.CreatedAt.Unix(),
		Seconds:   cmp.Or(j.Metadata[metaSeconds], defaultSeconds),
		Size:      cmp.Or(j.Metadata[metaSize], defaultSize),
		Prompt:    promptOf(j),
	}
	var code string
	v.Status, code = status(j.State)
	switch {
	case j.State == state.Succeeded:
		v.Progress = 100
	case v.Status != statusQueued && j.Progress != nil && !math.IsNaN(*j.Progress):
		v.Progress = int(math.Round(100 * min(max(*j.Progress, 0), 1)))
	}
	if j.State.Terminal() {
		v.CompletedAt = unix(j.CompletedAt)
	}
	v.ExpiresAt = unix(j.OutputsExpireAt)
	if code != "" {
		msg := j.Reason
		if msg == "" {
			msg = "the video job ended " + string(j.State)
		}
		v.Error = &videoError{Code: code, Message: msg}
	}
	return v
}

// promptOf is the prompt of job j: from its metadata, else from its kept
// input, else unknown (null).
func promptOf(j *state.Job) *string {
	if p, ok := j.Metadata[metaPrompt]; ok {
		return &p
	}
	var in struct {
		Prompt *string `json:"prompt"`
	}
	if len(j.Input) > 0 && json.Unmarshal(j.Input, &in) == nil {
		return in.Prompt
	}
	return nil
}

func unix(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	u := t.Unix()
	return &u
}
