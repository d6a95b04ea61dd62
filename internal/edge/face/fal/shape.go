package fal

import (
	"encoding/hex"
	"net/http"
	"net/url"
	"path"
	"strings"
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
const errorTypeHeader = "X-Fal-Error-Type"

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
	RequestID     string `json:"request_id"`
	ResponseURL   string `json:"response_url"`
	StatusURL     string `json:"status_url"`
	CancelURL     string `json:"cancel_url"`
	Status        string `json:"status"`
	QueuePosition int    `json:"queue_position"`
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
// ended; nil when it succeeded. Statuses and error types are fal's
// (its request errors and model errors); none is one the fal client
// retries a result on (429, 502, 503, 504 but the user's timeout), so
// the app learns the outcome at once:
//   - failed before the provider had it (refused at create): 422, the
//     model's validation error, which the client throws as a
//     ValidationError;
//   - failed at the provider: 500 runner_server_error;
//   - canceled: 499 client_cancelled;
//   - expired (Pollux's deadline passed): 504 request_timeout with
//     X-Fal-Request-Timeout-Type: user;
//   - lost (the provider lost the job): 500 internal_error.
func failureOf(j *state.Job) *face.Error {
	reason := j.Reason
	e := &face.Error{Message: reason, Header: http.Header{}}
	switch j.State {
	case state.Succeeded:
		return nil
	case state.Failed:
		if reason == "" {
			reason = "the request failed"
		}
		e.Status, e.Code, e.Message = http.StatusInternalServerError, "runner_server_error", reason
		if j.RemoteID == "" {
			e.Status, e.Code, e.Field = http.StatusUnprocessableEntity, "", "body"
		}
	case state.Canceled:
		e.Status, e.Code = 499, "client_cancelled"
		e.Message = orDefault(reason, "the request was canceled")
	case state.Expired:
		e.Status, e.Code = http.StatusGatewayTimeout, "request_timeout"
		e.Message = orDefault(reason, "the request timed out")
		e.Header.Set("X-Fal-Request-Timeout-Type", "user")
	default:
		e.Status, e.Code = http.StatusInternalServerError, "internal_error"
		e.Message = orDefault(reason, "the request was lost")
	}
	if e.Code != "" {
		e.Header.Set(errorTypeHeader, e.Code)
	}
	return e
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// file is a fal File object.
type file struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type,omitempty"`
	FileName    string `json:"file_name,omitempty"`
}

// result is a succeeded job's result. Pollux records a job's outputs as
// URLs, not the provider's JSON, so the result is built from them in the
// shape fal's video and image models answer: video is the first output
// that is not an image, images the outputs that are, and files every
// output in order (so none is lost whatever its kind). Each file's url is
// the one the face gives (face.Kit.OutputURL: Pollux's own for a kept
// output, else the provider's when safe; an output with none is left
// out); its name and type come from the provider's URL, or from what
// custody kept.
type result struct {
	Video  *file  `json:"video,omitempty"`
	Images []file `json:"images,omitempty"`
	Files  []file `json:"files"`
}

func resultOf(j *state.Job, link func(n int) (string, bool)) result {
	r := result{Files: []file{}}
	for n, o := range j.Outputs {
		u, ok := link(n)
		if !ok {
			continue
		}
		f := fileOf(o, u)
		if f.ContentType == "" && faceshape.Saved(j, n) {
			f.ContentType = j.Custody.Outputs[n].ContentType
		}
		r.Files = append(r.Files, f)
		switch {
		case strings.HasPrefix(f.ContentType, "image/"):
			r.Images = append(r.Images, f)
		case r.Video == nil:
			r.Video = &f
		}
	}
	return r
}

// contentTypes are the content types of output file extensions.
var contentTypes = map[string]string{
	".mp4": "video/mp4", ".webm": "video/webm", ".mov": "video/quicktime", ".gif": "image/gif",
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
	".mp3": "audio/mpeg", ".wav": "audio/wav",
}

// fileOf is the file of an output the provider gave as raw, linked as
// link.
func fileOf(raw, link string) file {
	f := file{URL: link}
	if u, err := url.Parse(raw); err == nil {
		name := path.Base(u.Path)
		if name != "." && name != "/" {
			f.FileName = name
		}
		f.ContentType = contentTypes[strings.ToLower(path.Ext(u.Path))]
	}
	return f
}

// fieldError is one entry of a validation error's detail, as FastAPI
// writes it and the fal client's ValidationError reads it.
type fieldError struct {
	Loc  []string `json:"loc"`
	Msg  string   `json:"msg"`
	Type string   `json:"type"`
}

// errorBody is fal's error shape: detail (a sentence, or a validation
// error's list) and error_type; message is what the fal client makes its
// error's message of; status is a cancel's answer.
type errorBody struct {
	Detail    any    `json:"detail,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
	Status    string `json:"status,omitempty"`
	Message   string `json:"message,omitempty"`
}

// locOf is where field is in a fal request, for a validation error.
func locOf(field string) []string {
	switch field {
	case "body", "input":
		return []string{"body"}
	case "model":
		return []string{"url", TargetHeader}
	case TargetHeader, "Idempotency-Key":
		return []string{"header", field}
	case "fal_webhook", "logs":
		return []string{"query", field}
	}
	return []string{"body", field}
}

// WriteError writes e in fal's shape: a 400 (or 422) naming a field is a
// 422 validation error whose detail lists it; any other error is
// {"detail": message}, with Retry-After when e says.
func (f *Face) WriteError(w http.ResponseWriter, e *face.Error) {
	h := w.Header()
	e.SetHeaders(h)
	msg := orDefault(e.Message, http.StatusText(e.Status))
	body := errorBody{Detail: msg, Message: msg}
	status := e.Status
	if (status == http.StatusBadRequest || status == http.StatusUnprocessableEntity) && e.Field != "" && e.Field != TargetHeader {
		status = http.StatusUnprocessableEntity
		body.Detail = []fieldError{{Loc: locOf(e.Field), Msg: msg, Type: "value_error"}}
	} else {
		body.ErrorType = h.Get(errorTypeHeader)
	}
	_ = face.WriteJSON(w, status, body) // an errorBody always encodes
}
