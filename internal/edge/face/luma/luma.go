package luma

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Bounds of the face.
const (
	// maxBody bounds a create's body, data: URIs included: large ones are
	// kept as input files (face.Kit.DataRefs), so the submission stays
	// small.
	maxBody = face.MaxDataBody
	// listLimit is a list's page when the request names none; maxOffset
	// bounds how far a list may skip (it walks the pages before it).
	listLimit = 10
	maxOffset = 10000
)

// Metadata keys a create writes besides face.MetaFace (faceshape's,
// which renders the generation for the face and its callbacks alike).
const (
	metaModel = faceshape.MetaLumaModel
	metaType  = faceshape.MetaLumaType // video or image
)

// Face is Luma's Dream Machine generations API over Pollux.
type Face struct{ *face.Kit }

// New builds the face of mount m over p (a face.New).
func New(m face.Mount, p face.Pollux) face.Face {
	f := &Face{}
	f.Kit = face.NewKit(m, p, f)
	return f
}

// Handler serves the generations API below the mount's prefix.
func (f *Face) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /generations/video", face.Serve(f, func(w http.ResponseWriter, r *http.Request) error { return f.create(w, r, "video") }))
	mux.Handle("POST /generations/image", face.Serve(f, func(w http.ResponseWriter, r *http.Request) error { return f.create(w, r, "image") }))
	mux.Handle("GET /generations", face.Serve(f, f.list))
	mux.Handle("GET /generations/{id}", face.Serve(f, f.get))
	mux.Handle("DELETE /generations/{id}", face.Serve(f, f.DeleteCancels("deleted through the Luma face")))
	mux.Handle("/", face.Serve(f, func(_ http.ResponseWriter, r *http.Request) error {
		return &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: "Not Found: " + r.Method + " " + r.URL.Path}
	}))
	return mux
}

// NotFound is the answer about a generation the face may not see.
func (f *Face) NotFound(string) *face.Error {
	return &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: "Generation not found"}
}

// Mints reports whether id is a generation id: a UUID.
func (f *Face) Mints(id string) bool { return face.IsUUID(id) }

// create submits a generation of kind (video or image): the body is the
// input as it is, its model the submission's.
func (f *Face) create(w http.ResponseWriter, r *http.Request, kind string) error {
	key, err := face.IdempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := face.ReadBody(w, r, maxBody)
	if err != nil {
		return err
	}
	var b struct {
		Model       *string         `json:"model"`
		Prompt      *string         `json:"prompt"`
		Keyframes   json.RawMessage `json:"keyframes"`
		CallbackURL *string         `json:"callback_url"`
	}
	if err := face.DecodeObject(body, &b); err != nil {
		return err
	}
	switch {
	case b.Model == nil || *b.Model == "":
		return invalid("model", "Field required: model")
	case (b.Prompt == nil || *b.Prompt == "") && len(b.Keyframes) == 0:
		return invalid("prompt", "Field required: prompt (or keyframes)")
	}
	if err := checkKeyframes(b.Keyframes); err != nil {
		return err
	}
	md := map[string]string{face.MetaFace: string(face.Luma), metaModel: *b.Model, metaType: kind}
	notifyURL, err := f.callback(r, b.CallbackURL, md)
	if err != nil {
		return err
	}
	input, err := f.DataRefs(w, r, body, "", nil)
	if err != nil {
		return err
	}
	id := face.UUID(face.IDBytes(r.Context(), face.Luma, f.Mount().Route, key, 16))
	m := events.Submit{V: events.Version, ID: id, IdempotencyKey: key, Model: *b.Model, Input: input, Metadata: md, NotifyURL: notifyURL}
	j, err := f.Create(r, m)
	if err != nil {
		return err
	}
	g := f.generation(r, j)
	g.Request = body
	return face.WriteJSON(w, http.StatusCreated, g)
}

// generation is job j as a generation for request r
// (faceshape.LumaGenerationOf, which Luma's callbacks carry too).
func (f *Face) generation(r *http.Request, j *state.Job) faceshape.LumaGeneration {
	return faceshape.LumaGenerationOf(j, f.Base(r), f.KeepsOutputs(j.Route))
}

// get answers a generation from its job's record (face.Kit.Poll).
func (f *Face) get(w http.ResponseWriter, r *http.Request) error {
	j, err := f.Poll(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, f.generation(r, j))
}

// list answers GET /generations: the face's generations on its route,
// newest first, limit (1 to face.MaxList) after offset (at most
// maxOffset), walking the pages before it.
func (f *Face) list(w http.ResponseWriter, r *http.Request) error {
	limit, err := intParam(r, "limit", listLimit, 1, face.MaxList)
	if err != nil {
		return err
	}
	offset, err := intParam(r, "offset", 0, 0, maxOffset)
	if err != nil {
		return err
	}
	page := struct {
		Generations []faceshape.LumaGeneration `json:"generations"`
		Count       int                        `json:"count"`
		HasMore     bool                       `json:"has_more"`
		Limit       int                        `json:"limit"`
		Offset      int                        `json:"offset"`
	}{Generations: []faceshape.LumaGeneration{}, Limit: limit, Offset: offset}
	want, seen, after := offset+limit, 0, "" // one job past want says has_more
	for seen <= want {
		jobs, more, err := f.List(r, after, min(want+1-seen, face.MaxList))
		if err != nil {
			return err
		}
		for _, j := range jobs {
			switch {
			case seen == want:
				page.HasMore = true
			case seen >= offset:
				page.Generations = append(page.Generations, f.generation(r, j))
			}
			seen++
		}
		if !more || len(jobs) == 0 {
			break
		}
		after = jobs[len(jobs)-1].ID
	}
	page.Count = len(page.Generations)
	return face.WriteJSON(w, http.StatusOK, page)
}

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalid(name, name+": a whole number from "+strconv.Itoa(lo)+" to "+strconv.Itoa(hi))
	}
	return n, nil
}

func invalid(field, msg string) *face.Error {
	return &face.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_field", Field: field, Message: msg}
}

// WriteError writes e as Luma does: {"detail": message}, or for a field
// at fault {"detail": [{loc, msg, type}]} with 422.
func (f *Face) WriteError(w http.ResponseWriter, e *face.Error) {
	e.SetHeaders(w.Header())
	msg := e.Message
	if e.Status == http.StatusUnauthorized {
		msg = "Invalid API key: the key must be a Pollux token of the front door's tokens file."
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Field == "" {
		_ = face.WriteJSON(w, e.Status, map[string]string{"detail": msg}) // always encodes
		return
	}
	status := e.Status
	if status == http.StatusBadRequest {
		status = http.StatusUnprocessableEntity // Luma's validation errors are 422s
	}
	_ = face.WriteJSON(w, status, map[string]any{"detail": []map[string]any{{"loc": []string{"body", e.Field}, "msg": msg, "type": "value_error"}}})
}
