package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/fal"
	"github.com/pollux-dev/pollux/internal/edge/face/genai"
	"github.com/pollux-dev/pollux/internal/edge/face/luma"
	"github.com/pollux-dev/pollux/internal/edge/face/openai"
	"github.com/pollux-dev/pollux/internal/edge/face/replicate"
	"github.com/pollux-dev/pollux/internal/edge/face/runway"
	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/internal/platform/faultpoint"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Faces: each mount of Config.Faces serves a provider's wire shape below
// face.Prefix(kind, route), built by Config.FaceBuilders (default
// Builders). The face's requests pass the same Host check, tokens and
// role checks as the rest of the front door; its refusals are written in
// the face's own error shape, so the provider's SDK reports them as it
// would the provider's. A face reaches Pollux only through facade, below.

// Builders are the faces this front door can serve.
var Builders = map[face.Kind]face.New{
	face.Fal:       fal.New,
	face.GenAI:     genai.New,
	face.Luma:      luma.New,
	face.OpenAI:    openai.New,
	face.Replicate: replicate.New,
	face.Runway:    runway.New,
}

// mountedFace is one face the front door serves.
type mountedFace struct {
	prefix string
	kind   face.Kind
	face   face.Face
}

// mountFaces builds the configured faces and registers their handlers.
func (s *Server) mountFaces(mux *http.ServeMux) {
	for _, f := range s.faces {
		mux.Handle(f.prefix+"/", http.StripPrefix(f.prefix, f.face.Handler()))
	}
}

// buildFaces checks and builds Config.Faces.
func (s *Server) buildFaces() error {
	builders := s.cfg.FaceBuilders
	if builders == nil {
		builders = Builders
	}
	seen := map[string]bool{}
	for _, m := range s.cfg.Faces {
		build, ok := builders[m.Kind]
		switch {
		case !ok:
			return fmt.Errorf("frontdoor: Faces: no face %q (the faces: %v)", m.Kind, face.Kinds)
		case !s.knownRoute(m.Route) && !slices.Contains(s.cfg.ModelRoutes, m.Route):
			return fmt.Errorf("frontdoor: Faces: %s face of %q: no such route or model route", m.Kind, m.Route)
		}
		m.Prefix = face.Prefix(m.Kind, m.Route)
		if seen[m.Prefix] {
			return fmt.Errorf("frontdoor: Faces: %s face of %q mounted twice", m.Kind, m.Route)
		}
		seen[m.Prefix] = true
		m.Logger = s.log.With().Str(logkey.Face, string(m.Kind)).Str(logkey.Route, m.Route).Logger()
		m.Now = s.cfg.Now
		s.faces = append(s.faces, mountedFace{prefix: m.Prefix, kind: m.Kind, face: build(m, facade{s})})
	}
	return nil
}

// faceAt returns the face that serves path, if any.
func (s *Server) faceAt(path string) face.Face {
	if f := s.mountAt(path); f != nil {
		return f.face
	}
	return nil
}

// mountAt returns the mounted face that serves path, if any.
func (s *Server) mountAt(path string) *mountedFace {
	for i, f := range s.faces {
		if path == f.prefix || strings.HasPrefix(path, f.prefix+"/") {
			return &s.faces[i]
		}
	}
	return nil
}

// faceKey is the token request r carries in the key header of the face
// its path is below (face.KeyHeader: the genai face's x-goog-api-key);
// sent reports whether it carries one.
func (s *Server) faceKey(r *http.Request) (tok string, sent bool) {
	f := s.mountAt(r.URL.Path)
	if f == nil || face.KeyHeader(f.kind) == "" {
		return "", false
	}
	v := r.Header.Values(face.KeyHeader(f.kind))
	if len(v) == 0 {
		return "", false
	}
	return strings.TrimSpace(v[0]), true
}

// writeError writes e in the shape of the face that serves r's path, or
// as the front door's JSON error.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	f := s.faceAt(r.URL.Path)
	if f == nil {
		e.write(w)
		return
	}
	f.WriteError(w, toFace(e))
}

// facade is the front door as a face sees it (face.Pollux).
type facade struct{ s *Server }

func (f facade) Submit(ctx context.Context, r *http.Request, route string, m events.Submit) error {
	if e := f.s.publishSubmit(ctx, r, r.Method+" "+r.URL.Path, route, m); e != nil {
		return toFace(e)
	}
	faultpoint.Hit("face-submitted") // durable: a crash from here on loses only the answer
	return nil
}

func (f facade) Job(ctx context.Context, id string) (*state.Job, error) {
	if !events.ValidToken(id) {
		return nil, state.ErrNotFound
	}
	return f.s.readJob(ctx, id)
}

func (f facade) Cancel(ctx context.Context, r *http.Request, j *state.Job, reason string) error {
	if j.State.Terminal() {
		return face.ErrTerminal
	}
	ctx, cancel := context.WithTimeout(ctx, f.s.cfg.RequestTimeout)
	defer cancel()
	if e := f.s.requestCancel(ctx, r, j, reason); e != nil {
		if e.detail.Code == CodeJobTerminal {
			return face.ErrTerminal // it ended meanwhile
		}
		return toFace(e)
	}
	return nil
}

func (f facade) Output(w http.ResponseWriter, r *http.Request, j *state.Job, n int, proxy bool) error {
	if n < 0 || n >= len(j.Outputs) {
		return face.ErrOutputNotFound
	}
	if faceshape.Saved(j, n) {
		if e := f.s.serveKept(w, r, j, n); e != nil {
			return toFace(e)
		}
		return nil
	}
	if proxy {
		return f.s.proxyOutput(w, r, j, n)
	}
	u, err := face.ProviderURL(j, n)
	if err != nil {
		return err
	}
	http.Redirect(w, r, u, http.StatusFound)
	return nil
}

func (f facade) KeepsOutputs(route string) bool { return slices.Contains(f.s.cfg.KeepOutputs, route) }

// Webhooks is how this Pollux calls apps' own webhook URLs, as the
// configuration's notify.submissions says.
type Webhooks struct {
	// AllowPrivate is notify.submissions.allow_private.
	AllowPrivate bool
	// Secrets are the server secrets (notify.submissions'), the current
	// one first, at least one: each token's Replicate signing secret is
	// derived from the current one and the token's name
	// (signature.DeriveSecret), as package notify signs with; the fal
	// face's webhooks are signed with the current one's Ed25519 key
	// (signature.DeriveFalKey), and FalJWKSPath publishes every one's.
	Secrets [][]byte
}

// Webhooks is how request r's caller's webhooks are called and signed
// (face.Pollux).
func (f facade) Webhooks(r *http.Request) *face.Webhooks {
	w := f.s.cfg.Webhooks
	if w == nil || len(w.Secrets) == 0 {
		return nil
	}
	return &face.Webhooks{AllowPrivate: w.AllowPrivate,
		Secret: signature.FormatSecret(signature.DeriveSecret(w.Secrets[0], who(r).by(r)))}
}

// listReads bounds the records one List reads for a face mounted on a
// model route, whose jobs the index finds among every route's.
const listReads = 4 * face.MaxList

func (f facade) List(ctx context.Context, k face.Kind, route, after string, limit int) ([]*state.Job, bool, error) {
	x := f.s.cfg.Index
	if x == nil {
		return nil, false, toFace(noIndex())
	}
	q := index.Query{Route: route, Face: k, Viewer: tenant.From(ctx), Limit: max(1, min(limit, face.MaxList))}
	if slices.Contains(f.s.cfg.ModelRoutes, route) {
		// The index knows the member route a job went to, not the model
		// route it came through: the records say.
		q.Route = ""
	}
	if err := f.s.readable(); err != nil {
		return nil, false, toFace(f.s.unavailable(err, "listing a face's jobs"))
	}
	if after != "" {
		c, ok := x.CursorAt(after)
		if !ok {
			return nil, false, face.ErrNoSuchJob
		}
		q.Cursor = c
	}
	ctx, cancel := context.WithTimeout(ctx, f.s.cfg.RequestTimeout)
	defer cancel()
	var out []*state.Job
	reads := 0
	for {
		page, err := x.List(q)
		if err != nil {
			return nil, false, err
		}
		for i, e := range page.Jobs {
			if reads == listReads {
				return out, true, nil
			}
			reads++
			j, err := f.s.jobs.Get(ctx, e.ID)
			switch {
			case errors.Is(err, state.ErrNotFound):
				continue // its record is gone; the index forgets it soon
			case err != nil:
				return nil, false, toFace(f.s.unavailable(err, "reading job "+e.ID))
			case face.SubmittedTo(j) != route:
				continue // another route's, routed here by a model route
			}
			f.s.known.remember(j)
			out = append(out, j)
			if len(out) == q.Limit {
				return out, i < len(page.Jobs)-1 || page.Next != "", nil
			}
		}
		if page.Next == "" {
			return out, false, nil
		}
		q.Cursor = page.Next
	}
}

func (f facade) Wait(ctx context.Context, id string, done func(*state.Job) bool) (*state.Job, error) {
	return f.s.waiters.wait(ctx, f, id, done)
}

// waiters wakes the requests waiting for jobs to change (face.Pollux's
// Wait) from one subscription to the jobs index.
type waiters struct {
	once sync.Once
	mu   sync.Mutex
	by   map[string]map[chan struct{}]struct{}
	// fallback is how often a waiter reads its record without a wake
	// (the index drops updates for a subscriber that falls behind).
	fallback time.Duration
}

// start subscribes to the index once, until ctx ends.
func (s *Server) startWaiters(ctx context.Context) {
	s.waiters.once.Do(func() {
		s.waiters.by = map[string]map[chan struct{}]struct{}{}
		s.waiters.fallback = 2 * time.Second
		if s.cfg.Index == nil {
			s.waiters.fallback = 500 * time.Millisecond
			return
		}
		ch := s.cfg.Index.Subscribe(ctx, 4096)
		go func() {
			for e := range ch {
				s.waiters.wake(e.ID)
			}
		}()
	})
}

func (w *waiters) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.by[id] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (w *waiters) add(id string) (chan struct{}, func()) {
	c := make(chan struct{}, 1)
	w.mu.Lock()
	if w.by == nil {
		w.by = map[string]map[chan struct{}]struct{}{}
	}
	if w.by[id] == nil {
		w.by[id] = map[chan struct{}]struct{}{}
	}
	w.by[id][c] = struct{}{}
	w.mu.Unlock()
	return c, func() {
		w.mu.Lock()
		delete(w.by[id], c)
		if len(w.by[id]) == 0 {
			delete(w.by, id)
		}
		w.mu.Unlock()
	}
}

func (w *waiters) wait(ctx context.Context, f facade, id string, done func(*state.Job) bool) (*state.Job, error) {
	wake, remove := w.add(id)
	defer remove()
	fallback := w.fallback
	if fallback == 0 {
		fallback = 500 * time.Millisecond
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var last *state.Job
	lastErr := state.ErrNotFound
	for {
		select {
		case <-ctx.Done():
			return last, lastErr
		case <-wake:
		case <-t.C:
		}
		j, err := f.Job(ctx, id)
		switch {
		case err == nil:
			last, lastErr = j, nil
			if done(j) {
				return j, nil
			}
		case errors.Is(err, state.ErrNotFound):
		case ctx.Err() != nil:
			return last, lastErr
		case errors.As(err, new(*face.Outage)):
			// Logged by the read; looked at again at the next wake.
		default:
			f.s.log.Warn().Err(err).Str(logkey.JobID, id).Msg("reading a waited-for job failed")
		}
		t.Reset(fallback)
	}
}

// toFace is a front door error as a face writes it: the facade's methods
// return the front door's errors (an invalid field, NATS unavailable) so,
// and its refusals reach a face's shape so (a face cannot import the front
// door, which imports every face).
func toFace(e *apiError) *face.Error {
	fe := &face.Error{Status: e.status, Code: string(e.detail.Code), Message: e.detail.Message, Field: e.detail.Field, Header: e.header, RetryAfter: e.retryAfter}
	if e.status == http.StatusServiceUnavailable && fe.RetryAfter == 0 {
		fe.RetryAfter = time.Second
	}
	return fe
}
