package openai

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
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
	*face.Kit
	// createWait bounds a create's wait for its job's record (createWait;
	// tests shorten it).
	createWait time.Duration
}

// New builds the face of mount m over p (a face.New).
func New(m face.Mount, p face.Pollux) face.Face {
	f := &Face{createWait: createWait}
	f.Kit = face.NewKit(m, p, f)
	return f
}

// Handler serves the videos API below the mount's prefix.
func (f *Face) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/videos", face.Serve(f, f.create))
	mux.Handle("GET /v1/videos", face.Serve(f, f.list))
	mux.Handle("GET /v1/videos/{id}", face.Serve(f, f.retrieve))
	mux.Handle("DELETE /v1/videos/{id}", face.Serve(f, f.delete))
	mux.Handle("GET /v1/videos/{id}/content", face.Serve(f, f.content))
	mux.Handle("/", face.Serve(f, func(_ http.ResponseWriter, r *http.Request) error {
		return &face.Error{Status: http.StatusNotFound, Code: "unknown_url",
			Message: "Invalid URL (" + r.Method + " " + r.URL.Path + "): Pollux's OpenAI face serves /v1/videos"}
	}))
	return mux
}

// NotFound is the answer about a video the face may not see.
func (f *Face) NotFound(id string) *face.Error {
	return &face.Error{Status: http.StatusNotFound, Code: "video_not_found", Message: "Video with id '" + id + "' not found."}
}

// Mints reports whether id is a video id the face makes: video_ and a
// job id.
func (f *Face) Mints(id string) bool { return strings.HasPrefix(id, idPrefix) && events.ValidToken(id) }

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
func (f *Face) WriteError(w http.ResponseWriter, e *face.Error) {
	h := w.Header()
	e.SetHeaders(h)
	if e.RetryAfter > 0 {
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
	_ = face.WriteJSON(w, e.Status, errorBody{Error: d}) // an errorBody always encodes
}

func cmpMsg(m, fallback string) string {
	if m == "" {
		return fallback
	}
	return m
}

// writeVideo answers job j as a video, with Pollux's plan for it in
// openai-poll-after-ms.
func (f *Face) writeVideo(w http.ResponseWriter, j *state.Job) error {
	f.pollAfter(w, j)
	return face.WriteJSON(w, http.StatusOK, videoOf(j))
}

// pollAfter sets openai-poll-after-ms from Pollux's own next check of j.
func (f *Face) pollAfter(w http.ResponseWriter, j *state.Job) {
	d := face.PollAfter(j, f.Mount().Clock(), pollFloor, pollCeiling)
	w.Header().Set("Openai-Poll-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
}

// retrieve answers a video from its job's record (or, through an outage,
// from what this process last knew of it: face.Kit.Poll).
func (f *Face) retrieve(w http.ResponseWriter, r *http.Request) error {
	j, err := f.Poll(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	return f.writeVideo(w, j)
}

// content serves the video's bytes: from output custody when the route
// keeps outputs, else a redirect to the provider's URL. Pollux has no
// thumbnail or spritesheet.
func (f *Face) content(w http.ResponseWriter, r *http.Request) error {
	variant := r.URL.Query().Get("variant")
	switch variant {
	case "", "video":
	case "thumbnail", "spritesheet":
		return &face.Error{Status: http.StatusNotFound, Code: "variant_not_found", Field: "variant",
			Message: "Pollux keeps no " + variant + " of a video: only variant=video"}
	default:
		return &face.Error{Status: http.StatusBadRequest, Code: "invalid_value", Field: "variant",
			Message: "Invalid value for 'variant': expected one of video, thumbnail, spritesheet."}
	}
	j, err := f.Job(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	if j.State != state.Succeeded {
		st, _ := status(j.State)
		return &face.Error{Status: http.StatusNotFound, Code: "video_not_ready",
			Message: "Video '" + j.ID + "' is " + st + ": its content exists once it is completed."}
	}
	f.pollAfter(w, j)
	err = f.Output(w, r, j, 0)
	switch {
	case errors.Is(err, face.ErrOutputNotFound):
		w.Header().Del("Openai-Poll-After-Ms")
		return &face.Error{Status: http.StatusNotFound, Code: "video_content_not_found",
			Message: "Video '" + j.ID + "' has no content Pollux can serve (its provider returned no output URL)"}
	case err != nil:
		w.Header().Del("Openai-Poll-After-Ms")
		return err
	}
	return nil
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
func (f *Face) delete(w http.ResponseWriter, r *http.Request) error {
	j, err := f.Job(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	if !j.State.Terminal() {
		err := f.Cancel(r, j, "deleted through the OpenAI face")
		switch {
		case errors.Is(err, face.ErrTerminal):
			if j, err = f.Job(r, j.ID); err != nil { // it ended meanwhile: as what?
				return err
			}
		case err != nil:
			return err
		default:
			f.pollAfter(w, j)
			return face.WriteJSON(w, http.StatusOK, deleted{ID: j.ID, Object: "video.deleted", Deleted: true})
		}
	}
	f.pollAfter(w, j)
	return face.WriteJSON(w, http.StatusOK, deleted{ID: j.ID, Object: "video.deleted", Deleted: j.State == state.Canceled})
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
func (f *Face) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := listLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > face.MaxList {
			return &face.Error{Status: http.StatusBadRequest, Code: "invalid_value", Field: "limit",
				Message: "limit must be a whole number from 1 to " + strconv.Itoa(face.MaxList) + ", not " + strconv.Quote(v)}
		}
		limit = n
	}
	if o := q.Get("order"); o != "" && o != "desc" {
		return &face.Error{Status: http.StatusBadRequest, Code: "invalid_value", Field: "order",
			Message: "Pollux lists videos newest first only: order must be desc, not " + strconv.Quote(o)}
	}
	after := q.Get("after")
	jobs, more, err := f.List(r, after, limit)
	switch {
	case errors.Is(err, face.ErrNoSuchJob):
		return &face.Error{Status: http.StatusBadRequest, Code: "invalid_value", Field: "after",
			Message: "after names no video of this list: " + strconv.Quote(after)}
	case err != nil:
		return err
	}
	page := videoList{Object: "list", Data: []video{}, HasMore: more}
	for _, j := range jobs {
		page.Data = append(page.Data, videoOf(j))
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	return face.WriteJSON(w, http.StatusOK, page)
}
