package replicate

import (
	"context"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Replicate's prediction statuses. Pollux never answers "aborted": the
// SDK's wait() does not end on it.
const (
	statusStarting   = "starting"
	statusProcessing = "processing"
	statusSucceeded  = "succeeded"
	statusFailed     = "failed"
	statusCanceled   = "canceled"
)

// Metadata keys a create writes on its job besides face.MetaFace: the
// model and version the create named (a version create names no model;
// a model route's member runs a model of its own).
const (
	metaModel   = "replicate_model"
	metaVersion = "replicate_version"
)

// prediction is Replicate's prediction object: every field the SDK reads
// and the ones an application reads from it.
type prediction struct {
	ID          string          `json:"id"`
	Model       string          `json:"model"`
	Version     string          `json:"version"`
	Input       json.RawMessage `json:"input"`
	Logs        string          `json:"logs"`
	Output      any             `json:"output"`
	DataRemoved bool            `json:"data_removed"`
	Error       *string         `json:"error"`
	Status      string          `json:"status"`
	Source      string          `json:"source"`
	CreatedAt   string          `json:"created_at"`
	StartedAt   *string         `json:"started_at"`
	CompletedAt *string         `json:"completed_at"`
	URLs        urls            `json:"urls"`
	Metrics     metrics         `json:"metrics"`
}

type urls struct {
	Get    string `json:"get"`
	Cancel string `json:"cancel"`
}

type metrics struct {
	PredictTime *float64 `json:"predict_time,omitempty"`
	TotalTime   *float64 `json:"total_time,omitempty"`
}

// idEncoding writes ids as Replicate's look: lowercase base32.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID is a create's prediction id: 26 characters of lowercase base32
// (128 bits), derived from the route and the create's Idempotency-Key
// when it has one.
func newID(ctx context.Context, route, key string) string {
	return idEncoding.EncodeToString(face.IDBytes(ctx, face.Replicate, route, key, 16))
}

// status maps a job's state to Replicate's vocabulary: waiting (pending,
// queued) is starting, running is processing, and every way of ending
// but success and cancel — failed, expired, lost — is failed, so the
// SDK's wait() ends on each.
func status(s state.State) string {
	switch s {
	case state.Running:
		return statusProcessing
	case state.Succeeded:
		return statusSucceeded
	case state.Canceled:
		return statusCanceled
	case state.Failed, state.Expired, state.Lost:
		return statusFailed
	default:
		return statusStarting
	}
}

// predictionOf is job j as a prediction; base is the face's absolute URL
// (scheme, host and mount prefix), input the create's own input, shown
// when the record keeps none, and outs the output URLs the app is to see
// (face.Kit.OutputURLs).
func predictionOf(j *state.Job, base string, input json.RawMessage, outs []string) prediction {
	p := prediction{
		ID:        j.ID,
		Model:     j.Model,
		Input:     json.RawMessage(`{}`),
		Logs:      logs(j),
		Status:    status(j.State),
		Source:    "api",
		CreatedAt: stamp(j.CreatedAt),
		URLs:      urls{Get: base + "/v1/predictions/" + j.ID, Cancel: base + "/v1/predictions/" + j.ID + "/cancel"},
	}
	if m := j.Metadata[metaModel]; m != "" {
		p.Model = m
	}
	if v := j.Metadata[metaVersion]; v != "" {
		p.Version = v
		if model, _, ok := strings.Cut(v, ":"); ok && j.Metadata[metaModel] == "" {
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
		p.Output = output(outs)
	case state.Failed, state.Expired, state.Lost:
		msg := failure(j)
		p.Error = &msg
	}
	return p
}

// output is a succeeded job's output as a Replicate model returns it: a
// single URL as a string (as video models answer), several as an array,
// none as null. The record keeps URLs, not the provider's own shape; outs
// are the ones the face gives (face.Kit.OutputURL: Pollux's own for a
// kept output, else the provider's when safe).
func output(outs []string) any {
	switch len(outs) {
	case 0:
		return nil
	case 1:
		return outs[0]
	default:
		return outs
	}
}

// failure is the error of a job that ended without success.
func failure(j *state.Job) string {
	what := map[state.State]string{state.Failed: "the job failed", state.Expired: "the job expired", state.Lost: "the job was lost"}[j.State]
	if j.Reason == "" {
		return what
	}
	if j.State == state.Failed {
		return j.Reason
	}
	return what + ": " + j.Reason
}

// logs is what Pollux knows of a waiting or running job, as log lines:
// why it waits, its queue position, and its progress as a tqdm bar, which
// the SDK's parseProgressFromLogs reads.
func logs(j *state.Job) string {
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
