package faceshape

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Replicate's prediction statuses. Pollux never answers "aborted": the
// SDK's wait() does not end on it.
const (
	StatusStarting   = "starting"
	StatusProcessing = "processing"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	StatusCanceled   = "canceled"
)

// Metadata keys a create writes on its job besides the face key: the
// model and version the create named (a version create names no model;
// a model route's member runs a model of its own).
const (
	MetaReplicateModel   = "replicate_model"
	MetaReplicateVersion = "replicate_version"
)

// Prediction is Replicate's prediction object: every field the SDK reads
// and the ones an application reads from it.
type Prediction struct {
	ID          string           `json:"id"`
	Model       string           `json:"model"`
	Version     string           `json:"version"`
	Input       json.RawMessage  `json:"input"`
	Logs        string           `json:"logs"`
	Output      any              `json:"output"`
	DataRemoved bool             `json:"data_removed"`
	Error       *string          `json:"error"`
	Status      string           `json:"status"`
	Source      string           `json:"source"`
	CreatedAt   string           `json:"created_at"`
	StartedAt   *string          `json:"started_at"`
	CompletedAt *string          `json:"completed_at"`
	URLs        replicateURLs    `json:"urls"`
	Metrics     replicateMetrics `json:"metrics"`
}

type replicateURLs struct {
	Get    string `json:"get"`
	Cancel string `json:"cancel"`
}

type replicateMetrics struct {
	PredictTime *float64 `json:"predict_time,omitempty"`
	TotalTime   *float64 `json:"total_time,omitempty"`
}

// replicateStatus maps a job's state to Replicate's vocabulary: waiting (pending,
// queued) is starting, running is processing, and every way of ending
// but success and cancel — failed, expired, lost — is failed, so the
// SDK's wait() ends on each.
func replicateStatus(s state.State) string {
	switch s {
	case state.Running:
		return StatusProcessing
	case state.Succeeded:
		return StatusSucceeded
	case state.Canceled:
		return StatusCanceled
	case state.Failed, state.Expired, state.Lost:
		return StatusFailed
	default:
		return StatusStarting
	}
}

// PredictionOf is job j as a prediction; base is the face's absolute URL
// (scheme, host and mount prefix), input the create's own input, shown
// when the record keeps none, and outs the output URLs the app is to see
// (OutputURL).
func PredictionOf(j *state.Job, base string, input json.RawMessage, outs []string) Prediction {
	p := Prediction{
		ID:        j.ID,
		Model:     j.Model,
		Input:     json.RawMessage(`{}`),
		Logs:      replicateLogs(j),
		Status:    replicateStatus(j.State),
		Source:    "api",
		CreatedAt: stamp(j.CreatedAt),
		URLs:      replicateURLs{Get: base + "/v1/predictions/" + j.ID, Cancel: base + "/v1/predictions/" + j.ID + "/cancel"},
	}
	if m := j.Metadata[MetaReplicateModel]; m != "" {
		p.Model = m
	}
	if v := j.Metadata[MetaReplicateVersion]; v != "" {
		p.Version = v
		if model, _, ok := strings.Cut(v, ":"); ok && j.Metadata[MetaReplicateModel] == "" {
			p.Model = model
		}
	}
	switch {
	case len(j.Input) > 0:
		p.Input = j.Input
	case len(input) > 0:
		p.Input = input
	}
	if !j.StartedAt.IsZero() {
		s := stamp(j.StartedAt)
		p.StartedAt = &s
	}
	if j.State.Terminal() {
		end := j.CompletedAt
		if end.IsZero() {
			end = j.UpdatedAt
		}
		s := stamp(end)
		p.CompletedAt = &s
		p.Metrics.TotalTime = seconds(end.Sub(j.CreatedAt))
		if !j.StartedAt.IsZero() {
			p.Metrics.PredictTime = seconds(end.Sub(j.StartedAt))
		}
	}
	switch j.State {
	case state.Succeeded:
		p.Output = replicateOutput(outs)
	case state.Failed, state.Expired, state.Lost:
		msg := replicateFailure(j)
		p.Error = &msg
	}
	return p
}

// replicateOutput is a succeeded job's output as a Replicate model returns it: a
// single URL as a string (as video models answer), several as an array,
// none as null. The record keeps URLs, not the provider's own shape; outs
// are the ones the face gives (OutputURL: Pollux's own for a
// kept output, else the provider's when safe).
func replicateOutput(outs []string) any {
	switch len(outs) {
	case 0:
		return nil
	case 1:
		return outs[0]
	default:
		return outs
	}
}

// replicateFailure is the error of a job that ended without success.
func replicateFailure(j *state.Job) string {
	what := map[state.State]string{state.Failed: "the job failed", state.Expired: "the job expired", state.Lost: "the job was lost"}[j.State]
	if j.Reason == "" {
		return what
	}
	if j.State == state.Failed {
		return j.Reason
	}
	return what + ": " + j.Reason
}

// replicateLogs is what Pollux knows of a waiting or running job, as log lines:
// why it waits, its queue position, and its progress as a tqdm bar, which
// the SDK's parseProgressFromLogs reads.
func replicateLogs(j *state.Job) string {
	var b strings.Builder
	if j.WaitingFor != "" && !j.State.Terminal() {
		fmt.Fprintf(&b, "waiting for %s\n", j.WaitingFor)
	}
	if j.QueuePosition != nil && !j.State.Terminal() {
		fmt.Fprintf(&b, "queue position: %d\n", *j.QueuePosition)
	}
	if j.Progress != nil {
		pct := int(math.Round(min(max(*j.Progress, 0), 1) * 100))
		bar := strings.Repeat("#", pct/10) + strings.Repeat(" ", 10-pct/10)
		fmt.Fprintf(&b, "%3d%%|%s| %d/100\n", pct, bar, pct)
	}
	return b.String()
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func seconds(d time.Duration) *float64 {
	s := math.Round(max(d.Seconds(), 0)*1000) / 1000
	return &s
}
