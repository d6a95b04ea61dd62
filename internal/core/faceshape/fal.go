package faceshape

import (
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/pollux-dev/pollux/pkg/state"
)

// The fal face's kind (MetaFace), and the metadata its submit writes on
// its job: the app id its status, result and cancel URLs name, and, for a
// submit with a fal_webhook, the face's absolute URL, which the
// delivery's output URLs are made of (its presence marks the job's
// webhook: FalHook).
const (
	FaceFal     = "fal"
	MetaFalApp  = "fal_app"
	MetaFalBase = "fal_base"
)

// FalTargetHeader carries the URL the fal client meant to call (its
// proxy protocol).
const FalTargetHeader = "x-fal-target-url"

// FalErrorTypeHeader carries a request error's error_type.
const FalErrorTypeHeader = "X-Fal-Error-Type"

// FalFile is a fal File object.
type FalFile struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type,omitempty"`
	FileName    string `json:"file_name,omitempty"`
}

// FalResult is a succeeded job's result. Pollux records a job's outputs
// as URLs, not the provider's JSON, so the result is built from them in
// the shape fal's video and image models answer: video is the first
// output that is not an image, images the outputs that are, and files
// every output in order (so none is lost whatever its kind). Each file's
// url is the one the face gives (OutputURL: Pollux's own for a kept
// output, else the provider's when safe; an output with none is left
// out); its name and type come from the provider's URL, or from what
// custody kept.
type FalResult struct {
	Video  *FalFile  `json:"video,omitempty"`
	Images []FalFile `json:"images,omitempty"`
	Files  []FalFile `json:"files"`
}

// FalResultOf is job j's result, link giving output n's URL (false: none).
func FalResultOf(j *state.Job, link func(n int) (string, bool)) FalResult {
	r := FalResult{Files: []FalFile{}}
	for n, o := range j.Outputs {
		u, ok := link(n)
		if !ok {
			continue
		}
		f := falFileOf(o, u)
		if f.ContentType == "" && Saved(j, n) {
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

// falFileOf is the file of an output the provider gave as raw, linked as
// link.
func falFileOf(raw, link string) FalFile {
	f := FalFile{URL: link}
	if u, err := url.Parse(raw); err == nil {
		name := path.Base(u.Path)
		if name != "." && name != "/" {
			f.FileName = name
		}
		f.ContentType = contentTypes[strings.ToLower(path.Ext(u.Path))]
	}
	return f
}

// FalFailure is how a request that did not succeed fails at fal: the
// status of its result call, its error_type ("" for a validation error),
// its message, the request field at fault ("body" for a validation
// error), and whether it is a timeout of the user's kind
// (X-Fal-Request-Timeout-Type: user).
type FalFailure struct {
	Status      int
	Type        string
	Message     string
	Field       string
	UserTimeout bool
}

// FalFailureOf is the failure a result call answers for job j, which has
// ended; nil when it succeeded. Statuses and error types are fal's (its
// request errors and model errors); none is one the fal client retries a
// result on (429, 502, 503, 504 but the user's timeout), so the app
// learns the outcome at once:
//   - failed before the provider had it (refused at create): 422, the
//     model's validation error, which the client throws as a
//     ValidationError;
//   - failed at the provider: 500 runner_server_error;
//   - canceled: 499 client_cancelled;
//   - expired (Pollux's deadline passed): 504 request_timeout of the
//     user's kind;
//   - lost (the provider lost the job): 500 internal_error.
func FalFailureOf(j *state.Job) *FalFailure {
	f := &FalFailure{Message: j.Reason}
	switch j.State {
	case state.Succeeded:
		return nil
	case state.Failed:
		f.Status, f.Type, f.Message = http.StatusInternalServerError, "runner_server_error", orDefault(j.Reason, "the request failed")
		if j.RemoteID == "" {
			f.Status, f.Type, f.Field = http.StatusUnprocessableEntity, "", "body"
		}
	case state.Canceled:
		f.Status, f.Type, f.Message = 499, "client_cancelled", orDefault(j.Reason, "the request was canceled")
	case state.Expired:
		f.Status, f.Type, f.Message = http.StatusGatewayTimeout, "request_timeout", orDefault(j.Reason, "the request timed out")
		f.UserTimeout = true
	default:
		f.Status, f.Type, f.Message = http.StatusInternalServerError, "internal_error", orDefault(j.Reason, "the request was lost")
	}
	return f
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// FalFieldError is one entry of a validation error's detail, as FastAPI
// writes it and the fal client's ValidationError reads it.
type FalFieldError struct {
	Loc  []string `json:"loc"`
	Msg  string   `json:"msg"`
	Type string   `json:"type"`
}

// FalError is fal's error shape: detail (a sentence, or a validation
// error's list) and error_type; message is what the fal client makes its
// error's message of; status is a cancel's answer.
type FalError struct {
	Detail    any    `json:"detail,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
	Status    string `json:"status,omitempty"`
	Message   string `json:"message,omitempty"`
}

// FalLoc is where field is in a fal request, for a validation error.
func FalLoc(field string) []string {
	switch field {
	case "body", "input":
		return []string{"body"}
	case "model":
		return []string{"url", FalTargetHeader}
	case FalTargetHeader, "Idempotency-Key":
		return []string{"header", field}
	case "fal_webhook", "logs":
		return []string{"query", field}
	}
	return []string{"body", field}
}

// FalErrorBody is fal's answer to an error of status with message msg:
// a 400 or 422 naming a request field (but the target header, a proxy
// matter) is a 422 validation error whose detail lists it; any other is
// {"detail": msg, "error_type": errType}. It returns the status to
// answer and the body.
func FalErrorBody(status int, field, msg, errType string) (int, FalError) {
	body := FalError{Detail: msg, Message: msg}
	if (status == http.StatusBadRequest || status == http.StatusUnprocessableEntity) && field != "" && field != FalTargetHeader {
		body.Detail = []FalFieldError{{Loc: FalLoc(field), Msg: msg, Type: "value_error"}}
		return http.StatusUnprocessableEntity, body
	}
	body.ErrorType = errType
	return status, body
}
