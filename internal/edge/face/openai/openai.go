package openai

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Bounds of the openai-poll-after-ms header: Pollux's own next check of
// the job, but never sooner than pollFloor (a check that is due or overdue
// still takes a moment to land) nor later than pollCeiling (a webhook may
// bring news before Pollux's next check).
const (
	pollFloor   = time.Second
	pollCeiling = 10 * time.Second
)

// idPrefix starts every video id, as OpenAI's do.
const idPrefix = "video_"

// Face is OpenAI's videos API over Pollux.
type Face struct {
	m face.Mount
	p face.Pollux
	// createWait bounds a create's wait for its job's record (createWait;
	// tests shorten it).
	createWait time.Duration
}

// New builds the face of mount m over p (a face.New).
func New(m face.Mount, p face.Pollux) face.Face { return &Face{m: m, p: p, createWait: createWait} }

// Handler serves the videos API below the mount's prefix.
func (f *Face) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/videos", f.create)
	mux.HandleFunc("GET /v1/videos", f.list)
	mux.HandleFunc("GET /v1/videos/{id}", f.retrieve)
	mux.HandleFunc("DELETE /v1/videos/{id}", f.delete)
	mux.HandleFunc("GET /v1/videos/{id}/content", f.content)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.WriteError(w, face.Error{Status: http.StatusNotFound, Code: "unknown_url",
			Message: "Invalid URL (" + r.Method + " " + r.URL.Path + "): Pollux's OpenAI face serves /v1/videos"})
	})
	return mux
}

// errorBody is OpenAI's error shape.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// WriteError writes e as OpenAI writes its errors; a Retry-After becomes
// Retry-After (seconds) and retry-after-ms, which the SDK honours.
func (f *Face) WriteError(w http.ResponseWriter, e face.Error) {
	h := w.Header()
	for k, v := range e.Header {
		h[k] = v
	}
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
		h.Set("Retry-After-Ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
	}
	d := errorDetail{Message: e.Message, Type: "invalid_request_error"}
	code := e.Code
	switch e.Status {
	case http.StatusUnauthorized:
		code, d.Message = "invalid_api_key", "Incorrect API key provided: the key must be a Pollux token of the front door's tokens file."
	case http.StatusForbidden:
		code = "insufficient_permissions"
		d.Message = cmpMsg(d.Message, "This key may not do that.")
	case http.StatusTooManyRequests:
		code, d.Type = "rate_limit_exceeded", "requests"
	}
	if e.Status >= 500 {
		d.Type = "server_error"
	}
	if d.Message == "" {
		d.Message = http.StatusText(e.Status)
	}
	if code != "" {
		d.Code = &code
	}
	if e.Field != "" {
		d.Param = &e.Field
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: d})
}

func cmpMsg(m, fallback string) string {
	if m == "" {
		return fallback
	}
	return m
}

// fail writes err, an error of a Pollux method, in OpenAI's shape.
func (f *Face) fail(w http.ResponseWriter, err error, what string) {
	if e, ok := face.AsError(err); ok {
		f.WriteError(w, e)
		return
	}
	f.m.Logger.Warn().Err(err).Msg(what)
	f.WriteError(w, face.Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: what + ": Pollux is unavailable; retry", RetryAfter: time.Second})
}

// writeVideo answers job j as a video, with Pollux's plan for it in
// openai-poll-after-ms.
func (f *Face) writeVideo(w http.ResponseWriter, j *state.Job) {
	f.pollAfter(w, j)
	writeJSON(w, http.StatusOK, videoOf(j))
}

// pollAfter sets openai-poll-after-ms from Pollux's own next check of j.
func (f *Face) pollAfter(w http.ResponseWriter, j *state.Job) {
	d := face.PollAfter(j, f.m.Clock(), pollFloor, pollCeiling)
	w.Header().Set("Openai-Poll-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// notFound is the answer about a video Pollux has no record of.
func notFound(id string) face.Error {
	return face.Error{Status: http.StatusNotFound, Code: "video_not_found", Message: "Video with id '" + id + "' not found."}
}

// job reads the video the path names; it writes the error and returns
// nil when there is none.
func (f *Face) job(w http.ResponseWriter, r *http.Request) *state.Job {
	id := r.PathValue("id")
	if !strings.HasPrefix(id, idPrefix) {
		f.WriteError(w, notFound(id))
		return nil
	}
	j, err := f.m.Record(r.Context(), f.p, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		f.WriteError(w, notFound(id))
		return nil
	case err != nil:
		f.fail(w, err, "reading video "+id)
		return nil
	}
	return j
}

func (f *Face) retrieve(w http.ResponseWriter, r *http.Request) {
	if j := f.job(w, r); j != nil {
		f.writeVideo(w, j)
	}
}

// content serves the video's bytes: from output custody when the route
// keeps outputs, else a redirect to the provider's URL. Pollux has no
// thumbnail or spritesheet.
func (f *Face) content(w http.ResponseWriter, r *http.Request) {
	variant := r.URL.Query().Get("variant")
	switch variant {
	case "", "video":
	case "thumbnail", "spritesheet":
		f.WriteError(w, face.Error{Status: http.StatusNotFound, Code: "variant_not_found", Field: "variant",
			Message: "Pollux keeps no " + variant + " of a video: only variant=video"})
		return
	default:
		f.WriteError(w, face.Error{Status: http.StatusBadRequest, Code: "invalid_value", Field: "variant",
			Message: "Invalid value for 'variant': expected one of video, thumbnail, spritesheet."})
		return
	}
	j := f.job(w, r)
	if j == nil {
		return
	}
	if j.State != state.Succeeded {
		st, _ := status(j.State)
		f.WriteError(w, face.Error{Status: http.StatusNotFound, Code: "video_not_ready",
			Message: "Video '" + j.ID + "' is " + st + ": its content exists once it is completed."})
		return
	}
	f.pollAfter(w, j)
	err := f.p.Output(w, r, j, 0)
	switch {
	case errors.Is(err, face.ErrOutputNotFound):
		w.Header().Del("Openai-Poll-After-Ms")
		f.WriteError(w, face.Error{Status: http.StatusNotFound, Code: "video_content_not_found",
			Message: "Video '" + j.ID + "' has no content Pollux can serve (its provider returned no output URL)"})
	case err != nil:
		w.Header().Del("Openai-Poll-After-Ms")
		f.fail(w, err, "serving the content of video "+j.ID)
	}
}

// deleted is OpenAI's answer to a delete.
type deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// delete cancels a video still being made (the provider stops, and the
// video ends failed with video_canceled): deleted is true. Pollux keeps
// the record of a video that has ended — it is Pollux's history, not the
// app's to erase — so deleting one answers deleted: false, but for one
// that was canceled (a delete retried after it took effect).
func (f *Face) delete(w http.ResponseWriter, r *http.Request) {
	j := f.job(w, r)
	if j == nil {
		return
	}
	if !j.State.Terminal() {
		err := f.p.Cancel(r.Context(), r, j, "deleted through the OpenAI face")
		switch {
		case errors.Is(err, face.ErrTerminal):
			id := j.ID
			if j, err = f.p.Job(r.Context(), id); err != nil {
				f.fail(w, err, "reading video "+id)
				return
			}
		case err != nil:
			f.fail(w, err, "canceling video "+j.ID)
			return
		default:
			f.pollAfter(w, j)
			writeJSON(w, http.StatusOK, deleted{ID: j.ID, Object: "video.deleted", Deleted: true})
			return
		}
	}
	f.pollAfter(w, j)
	writeJSON(w, http.StatusOK, deleted{ID: j.ID, Object: "video.deleted", Deleted: j.State == state.Canceled})
}

// listLimit is a list's page size when the request names none.
const listLimit = 20

// videoList is OpenAI's page of videos.
type videoList struct {
	Object  string  `json:"object"`
	Data    []video `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// list answers GET /v1/videos: the videos this face made on its route,
// newest first, limit at a time (1 to face.MaxList, default 20), after
// the video after names — the SDK's list() and its auto-pagination.
// Pollux lists newest first only: order=asc is refused.
func (f *Face) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := listLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > face.MaxList {
			f.WriteError(w, face.Error{Status: http.StatusBadRequest, Code: "invalid_value", Field: "limit",
				Message: "limit must be a whole number from 1 to " + strconv.Itoa(face.MaxList) + ", not " + strconv.Quote(v)})
			return
		}
		limit = n
	}
	if o := q.Get("order"); o != "" && o != "desc" {
		f.WriteError(w, face.Error{Status: http.StatusBadRequest, Code: "invalid_value", Field: "order",
			Message: "Pollux lists videos newest first only: order must be desc, not " + strconv.Quote(o)})
		return
	}
	after := q.Get("after")
	jobs, more, err := f.p.List(r.Context(), face.OpenAI, f.m.Route, after, limit)
	switch {
	case errors.Is(err, face.ErrNoSuchJob):
		f.WriteError(w, face.Error{Status: http.StatusBadRequest, Code: "invalid_value", Field: "after",
			Message: "after names no video of this list: " + strconv.Quote(after)})
		return
	case err != nil:
		f.fail(w, err, "listing videos")
		return
	}
	page := videoList{Object: "list", Data: []video{}, HasMore: more}
	for _, j := range jobs {
		if strings.HasPrefix(j.ID, idPrefix) { // made by this face, not only labelled so
			page.Data = append(page.Data, videoOf(j))
		}
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}
