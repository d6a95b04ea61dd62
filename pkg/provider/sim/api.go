package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxBodyBytes bounds request bodies; larger ones are answered 413.
const MaxBodyBytes = 1 << 20

// createRequest is the body of a create call.
type createRequest struct {
	Version *string         `json:"version"`
	Input   json.RawMessage `json:"input"`
	Webhook *string         `json:"webhook"`
	Filter  []string        `json:"webhook_events_filter"`
}

// problem is Replicate's error body.
type problem struct {
	Title  string `json:"title,omitempty"`
	Detail string `json:"detail"`
	Status int    `json:"status,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "sim: encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

func writeProblem(w http.ResponseWriter, code int, title, detail string) {
	writeJSON(w, code, problem{Title: title, Detail: detail, Status: code})
}

func writeNotFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, problem{Detail: "Not found."})
}

// badRequest is a create refused before anything happened.
type badRequest struct {
	code   int
	title  string
	detail string
}

func invalid(format string, args ...any) *badRequest {
	return &badRequest{code: http.StatusUnprocessableEntity, title: "Input validation failed", detail: fmt.Sprintf(format, args...)}
}

// parsedCreate is a validated create call.
type parsedCreate struct {
	model, version string
	input          json.RawMessage
	webhook        string
	filter         []string
	key            string
	cancelAfter    time.Duration
}

func (s *Server) parseCreate(w http.ResponseWriter, r *http.Request) (parsedCreate, *badRequest) {
	var pc parsedCreate
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return pc, &badRequest{code: http.StatusRequestEntityTooLarge, title: "Request too large",
				detail: fmt.Sprintf("The request body exceeds %d bytes.", MaxBodyBytes)}
		}
		return pc, &badRequest{code: http.StatusBadRequest, title: "Bad request", detail: "Could not read the request body."}
	}
	var req createRequest
	if err := json.Unmarshal(body, &req); err != nil {
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return pc, invalid("%s", err.Error())
		}
		return pc, &badRequest{code: http.StatusBadRequest, title: "Bad request", detail: "The request body is not valid JSON."}
	}
	if owner, name := r.PathValue("owner"), r.PathValue("name"); owner != "" {
		pc.model = owner + "/" + name
	} else {
		if req.Version == nil || strings.TrimSpace(*req.Version) == "" {
			return pc, invalid("version is required")
		}
		v := *req.Version
		switch {
		case strings.Contains(v, ":"):
			pc.model, pc.version, _ = strings.Cut(v, ":")
		case strings.Contains(v, "/"):
			pc.model = v
		default:
			pc.version = v
		}
	}
	in := bytes.TrimSpace(req.Input)
	if len(in) == 0 || in[0] != '{' {
		return pc, invalid("input: must be a JSON object")
	}
	pc.input = in
	if req.Webhook != nil && *req.Webhook != "" {
		u, err := url.Parse(*req.Webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return pc, invalid("webhook: %q is not an absolute http(s) URL", *req.Webhook)
		}
		pc.webhook = *req.Webhook
	}
	for _, ev := range req.Filter {
		switch ev {
		case EventStart, EventOutput, EventLogs, EventCompleted:
		default:
			return pc, invalid("webhook_events_filter: unknown event %q (want start, output, logs or completed)", ev)
		}
	}
	pc.filter = req.Filter
	pc.key = r.Header.Get("Idempotency-Key")
	if h := r.Header.Get("Cancel-After"); h != "" {
		d, err := parseDuration(h)
		if err != nil || d <= 0 {
			return pc, invalid("Cancel-After: %q is not a positive duration such as \"90s\" or \"5m\"", h)
		}
		pc.cancelAfter = d
	}
	return pc, nil
}

// modelFor returns the behaviour of a model: by the full version string,
// the model name or the version id, else Default.
func (s *Server) modelFor(names ...string) Model {
	for _, n := range names {
		if m, ok := s.cfg.Models[n]; ok && n != "" {
			return m
		}
	}
	return s.cfg.Default
}

func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.BaseURL != "" {
		return s.cfg.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// handleCreate serves POST /v1/predictions and the model and deployment
// routes. "Prefer: wait" is ignored: the answer never waits.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, now time.Time) {
	pc, bad := s.parseCreate(w, r)
	if bad != nil {
		s.mu.Lock()
		s.c.badRequests++
		s.mu.Unlock()
		writeProblem(w, bad.code, bad.title, bad.detail)
		return
	}
	full := pc.model
	if pc.version != "" && pc.model != "" {
		full += ":" + pc.version
	}
	m := s.modelFor(full, pc.model, pc.version)
	base := s.baseURL(r)
	files, err := s.receiveInputs(r.Context(), pc.input, pc.key)
	if err != nil {
		writeProblem(w, http.StatusUnprocessableEntity, "Input validation failed", err.Error())
		return
	}

	created, refused := s.createOrReplay(pc, m, base, now)
	if refused != nil {
		writeJSON(w, http.StatusTooManyRequests, refused)
		return
	}
	s.recordInputs(created.ID, files)
	if d := time.Duration(s.cfg.CreateDelay); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-r.Context().Done(): // the client gave up: the prediction stays
			t.Stop()
			return
		case <-t.C:
		}
	}
	writeJSON(w, http.StatusCreated, created)
}

// createOrReplay makes a prediction, or finds the one made with the same
// Idempotency-Key, and renders it. A create that would make a prediction
// while Limits.Running are running is refused instead: it makes nothing,
// counts as rate limited rather than as a create, and returns the 429 body.
// A replay makes nothing, so the limit does not apply to it.
func (s *Server) createOrReplay(pc parsedCreate, m Model, base string, now time.Time) (wirePrediction, *problem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p *prediction
	id, seen := s.keys[pc.key]
	seen = seen && pc.key != ""
	if seen && !s.cfg.Faults.NotIdempotent {
		p = s.preds[id]
	}
	if p == nil {
		now = s.moment(now)
		running := s.pruneActive(now)
		if limit := s.cfg.Limits.Running; limit > 0 && running >= limit {
			s.c.rateLimited++
			s.c.runningRefused++
			refused := runningLimitProblem(limit)
			return wirePrediction{}, &refused
		}
		p = s.create(pc, m, base, now)
		if p.runningAt(now) {
			s.active = append(s.active, p)
		}
		s.c.peakRunning = max(s.c.peakRunning, len(s.active))
		if pc.key != "" && !seen {
			s.keys[pc.key] = p.id
		}
	}
	if pc.key != "" {
		if seen {
			s.c.duplicateCreates++
		}
		s.c.keyCreates[pc.key]++
		s.c.maxCreatesPerKey = max(s.c.maxCreatesPerKey, s.c.keyCreates[pc.key])
	}
	s.c.creates++
	return p.wire(now), nil
}

// create makes a prediction and queues its webhook events. Call with s.mu
// held.
func (s *Server) create(pc parsedCreate, m Model, base string, now time.Time) *prediction {
	n := s.nextSeq
	s.nextSeq++
	ft := drawFate(s.seed, n, m, s.cfg.Faults, s.cfg.TimeScale)
	p := &prediction{
		seq:         n,
		id:          newID(),
		model:       pc.model,
		version:     pc.version,
		input:       pc.input,
		key:         pc.key,
		baseURL:     base,
		webhook:     pc.webhook,
		filter:      pc.filter,
		whMissing:   ft.missing,
		whDuplicate: ft.duplicate,
		whLate:      ft.late,
		createdAt:   now,
		startAt:     now.Add(ft.queue),
		endAt:       now.Add(ft.queue + ft.run),
		outcome:     ft.outcome,
		failFrac:    ft.failFrac,
		outputBytes: cmp.Or(m.OutputBytes, s.cfg.OutputBytes),
		outputGone:  ft.outputGone,
	}
	for s.preds[p.id] != nil { // 130 random bits: never, but cheap to rule out
		p.id = newID()
	}
	if pc.cancelAfter > 0 {
		p.deadline = now.Add(pc.cancelAfter)
	}
	if ft.lost {
		p.lostAt = now.Add(time.Duration(ft.lostFrac * float64(ft.queue+ft.run)))
	}
	if p.webhook != "" {
		// No filter: Replicate's default is output, logs and completed;
		// the sim sends only "completed" of those.
		p.wantStart = slices.Contains(pc.filter, EventStart)
		p.wantDone = len(pc.filter) == 0 || slices.Contains(pc.filter, EventCompleted)
		if p.wantStart {
			s.schedule(p.startAt, p.id, eventStart)
		}
		if end, _, ok := p.terminal(); ok && p.wantDone {
			s.schedule(end, p.id, eventCompleted)
		}
	}
	s.preds[p.id] = p
	s.order = append(s.order, p)
	return p
}

// handleGet serves GET /v1/predictions/{id}.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, now time.Time) {
	s.answer(w, r.PathValue("id"), now, false)
}

// handleCancel serves POST /v1/predictions/{id}/cancel: a prediction not
// yet terminal becomes canceled now; a terminal one is unchanged.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, now time.Time) {
	s.answer(w, r.PathValue("id"), now, true)
}

// answer renders prediction id (canceling it first if asked) under the
// lock, and writes the answer after releasing it.
func (s *Server) answer(w http.ResponseWriter, id string, now time.Time, cancel bool) {
	view, ok := func() (wirePrediction, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p := s.preds[id]
		if p == nil || p.lostBy(now) {
			s.c.notFound++
			return wirePrediction{}, false
		}
		if cancel {
			// A cancel is a change: it takes effect no earlier than
			// the last create, whose running count it would
			// otherwise rewrite.
			now = s.moment(now)
			if !isTerminal(p.at(now).status) {
				p.canceled = now
				if p.webhook != "" && p.wantDone {
					s.schedule(now, p.id, eventCompleted)
				}
			}
		}
		if !cancel && s.regress() {
			// Show the prediction as it was halfway through its life.
			return p.wire(p.createdAt.Add(now.Sub(p.createdAt) / 2)), true
		}
		return p.wire(now), true
	}()
	if !ok {
		writeNotFound(w)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// handleSecret serves GET /v1/webhooks/default/secret.
func (s *Server) handleSecret(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, http.StatusOK, map[string]string{"key": s.secret})
}

// ListPageSize is how many predictions a page of GET /v1/predictions
// holds, as at Replicate.
const ListPageSize = 100

// predictionPage is Replicate's paginated list of predictions.
type predictionPage struct {
	Next     *string            `json:"next"`
	Previous *string            `json:"previous"`
	Results  []listedPrediction `json:"results"`
}

// listedPrediction is a prediction as listed: with its webhook URL always,
// "" for none, so that a client can tell a list that shows webhook URLs.
type listedPrediction struct {
	wirePrediction
	Webhook string `json:"webhook"`
}

// handleList serves GET /v1/predictions: the predictions not lost, newest
// first, ListPageSize a page, created at or after created_after and before
// created_before (RFC 3339, both optional), "next" naming the following
// page by a cursor. Each carries its webhook URL (a sim extension: Replicate's
// list does not), which is what a client can find its predictions by.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request, now time.Time) {
	q := r.URL.Query()
	var after, before time.Time
	for name, t := range map[string]*time.Time{"created_after": &after, "created_before": &before} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		parsed, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, "Bad request", fmt.Sprintf("%s: %q is not an ISO 8601 date-time", name, v))
			return
		}
		*t = parsed
	}
	// The cursor is the sequence number the page starts below.
	start := uint64(math.MaxUint64)
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, "Bad request", "cursor: not a cursor this API gave")
			return
		}
		start = n
	}
	page := predictionPage{Results: []listedPrediction{}}
	var last uint64
	s.mu.Lock()
	for i := len(s.order) - 1; i >= 0; i-- {
		p := s.order[i]
		if p.seq >= start || p.lostBy(now) || !before.IsZero() && !p.createdAt.Before(before) {
			continue
		}
		if !after.IsZero() && p.createdAt.Before(after) {
			break // older ones are older still
		}
		if len(page.Results) == ListPageSize {
			next := *r.URL
			nq := next.Query()
			nq.Set("cursor", strconv.FormatUint(last, 10))
			next.RawQuery = nq.Encode()
			u := s.baseURL(r) + next.RequestURI()
			page.Next = &u
			break
		}
		page.Results = append(page.Results, listedPrediction{wirePrediction: p.wire(now), Webhook: p.webhook})
		last = p.seq
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, page)
}
