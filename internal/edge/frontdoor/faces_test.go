package frontdoor_test

import (
	"context"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// probeFace is a face for the front door's side of the contract: it
// answers in a shape of its own ({"probe_error": code}) and exposes the
// facade's verbs as endpoints.
type probeFace struct {
	m face.Mount
	p face.Pollux
}

func (f *probeFace) Logger() *zerolog.Logger { return &f.m.Logger }

func (f *probeFace) WriteError(w http.ResponseWriter, e *face.Error) {
	for k, v := range e.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"probe_error": e.Code, "field": e.Field})
}

func (f *probeFace) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /create", func(w http.ResponseWriter, r *http.Request) {
		key, err := face.IdempotencyKey(r)
		if e := (*face.Error)(nil); errors.As(err, &e) {
			f.WriteError(w, e)
			return
		}
		id := "p-" + strings.ToLower(b32(face.IDBytes(r.Context(), f.m.Kind, f.m.Route, key, 10)))
		err = f.p.Submit(r.Context(), r, f.m.Route, events.Submit{V: events.Version, ID: id, Model: "m", IdempotencyKey: key, Input: json.RawMessage(`{}`)})
		if e := (*face.Error)(nil); errors.As(err, &e) {
			f.WriteError(w, e)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
	})
	mux.HandleFunc("GET /list", func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		jobs, more, err := f.p.List(r.Context(), f.m.Kind, f.m.Route, r.URL.Query().Get("after"), limit)
		if errors.Is(err, face.ErrNoSuchJob) {
			f.WriteError(w, &face.Error{Status: 400, Code: "no_such_job"})
			return
		}
		ids := []string{}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"ids": ids, "more": more})
	})
	mux.HandleFunc("GET /wait/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("for"))
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		j, err := f.p.Wait(ctx, r.PathValue("id"), func(j *state.Job) bool { return j.State.Terminal() })
		if errors.Is(err, state.ErrNotFound) {
			f.WriteError(w, &face.Error{Status: 404, Code: "not_found"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"state": string(j.State)})
	})
	return mux
}

func b32(b []byte) string {
	const alpha = "abcdefghijklmnopqrstuvwxyz234567"
	var sb strings.Builder
	for _, c := range b {
		sb.WriteByte(alpha[c%32])
	}
	return sb.String()
}

func probeBuilders() map[face.Kind]face.New {
	return map[face.Kind]face.New{face.Replicate: func(m face.Mount, p face.Pollux) face.Face { return &probeFace{m: m, p: p} }}
}

// A face's requests pass the front door's checks, and its refusals reach
// the SDK in the face's own shape; a create goes through the one
// submission path (who acts is the token's name; a key makes one id).
func TestAFaceIsBehindTheFrontDoor(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=alice\n" + tokenRead + " read\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens, Faces: []face.Mount{{Kind: face.Replicate, Route: route}}, FaceBuilders: probeBuilders()}, withIndex)

	r := d.do(t, http.MethodPost, "/replicate/sim/create", "", nil)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "unauthorized", r.body["probe_error"], "the face's shape: %s", r.raw)
	r = d.do(t, http.MethodPost, "/replicate/sim/create", "", map[string]string{"Authorization": "Token " + tokenRead})
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, "forbidden", r.body["probe_error"])
	r = d.do(t, http.MethodPost, "/replicate/other/create", "", map[string]string{"Authorization": "Bearer " + tokenAlice})
	require.Equal(t, http.StatusNotFound, r.status, "no face is mounted on route other")

	// Key is fal's scheme; the key makes the id.
	one := d.do(t, http.MethodPost, "/replicate/sim/create", "", map[string]string{"Authorization": "Key " + tokenAlice, "Idempotency-Key": "k1"})
	two := d.do(t, http.MethodPost, "/replicate/sim/create", "", map[string]string{"Authorization": "Key " + tokenAlice, "Idempotency-Key": "k1"})
	require.Equal(t, http.StatusOK, one.status, "%s", one.raw)
	require.Equal(t, one.body["id"], two.body["id"], "one key, one job id")
	var sub events.Submit
	require.NoError(t, json.Unmarshal(d.lastIntake(t, d.ns.Submit(route)), &sub))
	require.Equal(t, one.body["id"], sub.ID)
	require.Equal(t, "alice", sub.By, "who acts is the token's name")
	require.Equal(t, "k1", sub.IdempotencyKey)
	three := d.do(t, http.MethodPost, "/replicate/sim/create", "", map[string]string{"Authorization": "Key " + tokenAlice})
	require.NotEqual(t, one.body["id"], three.body["id"], "no key: a new job")
}

// Wait returns once the record is what the face waits for: woken by the
// jobs index, not by polling anyone.
func TestAFaceWaitsForAJob(t *testing.T) {
	t.Parallel()
	d := setupWith(t, frontdoor.Config{Faces: []face.Mount{{Kind: face.Replicate, Route: route}}, FaceBuilders: probeBuilders()}, withIndex)
	r := d.do(t, http.MethodGet, "/replicate/sim/wait/nope?for=200ms", "", nil)
	require.Equal(t, http.StatusNotFound, r.status)

	rec, created, err := d.jobs.Intake().Accept(t.Context(), &state.Job{ID: "w-1", Route: route, Model: "m", State: state.Pending, CreatedAt: time.Now().UTC()})
	require.NoError(t, err)
	require.True(t, created)
	got := make(chan reply, 1)
	go func() { got <- d.do(t, http.MethodGet, "/replicate/sim/wait/w-1?for=12s", "", nil) }()
	select {
	case r := <-got:
		t.Fatalf("answered before the job ended: %s", r.raw)
	case <-time.After(300 * time.Millisecond):
	}
	_, err = d.jobs.Intake().End(t.Context(), rec, state.Observation{State: state.Succeeded, Source: state.FromPoll, At: time.Now()}, jobs.Always)
	require.NoError(t, err)
	select {
	case r := <-got:
		require.Equal(t, "succeeded", r.body["state"], "%s", r.raw)
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter was not woken")
	}
}

func TestFacesAreChecked(t *testing.T) {
	t.Parallel()
	srvCfg := frontdoor.Config{Faces: []face.Mount{{Kind: face.Fal, Route: route}}, FaceBuilders: probeBuilders()}
	_, err := frontdoor.New(frontdoor.Config{Routes: []string{route}, Faces: srvCfg.Faces, FaceBuilders: srvCfg.FaceBuilders}, nil, events.Default, &events.Resources{}, nil)
	require.ErrorContains(t, err, `no face "fal"`)
	_, err = frontdoor.New(frontdoor.Config{Routes: []string{route}, Faces: []face.Mount{{Kind: face.Replicate, Route: "nope"}}, FaceBuilders: probeBuilders()}, nil, events.Default, &events.Resources{}, nil)
	require.ErrorContains(t, err, "no such route")
}

// A token's quota (rate=) holds an app that polls too hard to it: 429
// with Retry-After, in the face's own shape on a face; other tokens are
// not held.
func TestATokensQuota(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=alice rate=1\n" + tokenRead + " read\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens, Faces: []face.Mount{{Kind: face.Replicate, Route: route}}, FaceBuilders: probeBuilders()}, withIndex)
	alice := map[string]string{"Authorization": "Bearer " + tokenAlice}
	var last reply
	for range 5 { // a burst of 2; the clock would have to stall for seconds to refill 3
		last = d.do(t, http.MethodGet, "/replicate/sim/wait/nope?for=1ms", "", alice)
	}
	require.Equal(t, http.StatusTooManyRequests, last.status, "%s", last.raw)
	require.Equal(t, "too_many_requests", last.body["probe_error"])
	require.Equal(t, "1", last.header.Get("Retry-After"))
	r := d.do(t, http.MethodGet, "/v1/jobs/nope", "", alice)
	require.Equal(t, http.StatusTooManyRequests, r.status, "the quota is the token's, on every path")
	code, _ := r.code()
	require.Equal(t, "too_many_requests", code)
	r = d.do(t, http.MethodGet, "/v1/jobs/nope", "", map[string]string{"Authorization": "Bearer " + tokenRead})
	require.Equal(t, http.StatusNotFound, r.status, "another token is not held")

	_, err = frontdoor.ParseTokens(strings.NewReader(tokenAlice + " rate=0\n"))
	require.ErrorContains(t, err, "line 1: rate=")
	_, err = frontdoor.ParseTokens(strings.NewReader(tokenAlice + " rate=2 rate=3\n"))
	require.ErrorContains(t, err, "line 1: rate=")
}

// A create held by Prefer: wait outlives the server's write timeout: the
// face extends its own write deadline for the hold, and the SDK gets the
// ended prediction, not a cut connection.
func TestAHeldCreateOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	d := setupWith(t, frontdoor.Config{WriteTimeout: time.Second, Faces: []face.Mount{{Kind: face.Replicate, Route: route}}}, withIndex)
	const key = "held-order"
	id := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding).EncodeToString(face.IDBytes(context.Background(), face.Replicate, route, key, 16))
	ingested := make(chan struct{})
	t.Cleanup(func() { <-ingested }) // before the server stops: its writes land or see the test's end
	go func() {                      // ingest's part: the record, and its end 2s later
		defer close(ingested)
		var rec jobs.Record
		if !assert.Eventually(t, func() bool {
			m, err := d.res.Intake.GetLastMsgForSubject(context.Background(), d.ns.Submit(route))
			if err != nil {
				return false
			}
			var sub events.Submit
			if json.Unmarshal(m.Data, &sub) != nil || sub.ID != id {
				return false
			}
			rec, _, err = d.jobs.Intake().Accept(context.Background(), &state.Job{ID: id, Route: route, Model: sub.Model, State: state.Pending,
				Metadata: sub.Metadata, CreatedAt: time.Now().UTC()})
			return err == nil
		}, 10*time.Second, 20*time.Millisecond) {
			return
		}
		select { // the job ends after the write timeout has passed
		case <-time.After(2 * time.Second):
		case <-t.Context().Done():
			return
		}
		_, err := d.jobs.Intake().End(context.Background(), rec, state.Observation{State: state.Succeeded, Source: state.FromPoll, At: time.Now()}, jobs.Always)
		assert.NoError(t, err)
	}()
	r := d.do(t, http.MethodPost, "/replicate/sim/v1/models/acme/video/predictions", `{"input":{"prompt":"p"}}`,
		map[string]string{"Prefer": "wait=8", "Idempotency-Key": key})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	require.Equal(t, id, r.body["id"])
	require.Equal(t, "succeeded", r.body["status"], "%s", r.raw)
}

// A face lists the jobs it made on its route from the jobs index, newest
// first, a page after the last id; on a model route, the jobs routed
// through it. Jobs made elsewhere, or by another face, are not its.
func TestAFaceListsTheJobsItMade(t *testing.T) {
	t.Parallel()
	const via = "models"
	d := setupWith(t, frontdoor.Config{ModelRoutes: []string{via},
		Faces: []face.Mount{{Kind: face.Replicate, Route: route}, {Kind: face.Replicate, Route: via}}, FaceBuilders: probeBuilders()}, withIndex)
	at := time.Now().UTC().Add(-time.Hour)
	accept := func(id string, meta map[string]string, routing *state.Routing, i int) {
		on := route
		if routing != nil {
			on = "other"
		}
		j := &state.Job{ID: id, Route: on, Model: "m", State: state.Queued, CreatedAt: at.Add(time.Duration(i) * time.Second), Metadata: meta, Routing: routing}
		_, created, err := d.jobs.Intake().Accept(t.Context(), j)
		require.NoError(t, err)
		require.True(t, created)
		d.publish(t, j, "queued", 1, state.Queued)
	}
	mine := map[string]string{"face": "replicate"}
	for i := range 5 {
		accept(fmt.Sprintf("mine-%d", i), mine, nil, i)
	}
	accept("routed", mine, &state.Routing{Via: via}, 10)
	accept("nats-made", nil, nil, 11)
	accept("fal-made", map[string]string{"face": "fal"}, nil, 12)
	require.Eventually(t, func() bool { n, _ := d.index.Size(); return n >= 8 }, 10*time.Second, 10*time.Millisecond, "the index has the jobs")

	list := func(path string) (ids []string, more bool) {
		t.Helper()
		r := d.do(t, http.MethodGet, path, "", nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		for _, id := range r.body["ids"].([]any) {
			ids = append(ids, id.(string))
		}
		return ids, r.body["more"].(bool)
	}
	ids, more := list("/replicate/sim/list?limit=3")
	require.Equal(t, []string{"mine-4", "mine-3", "mine-2"}, ids)
	require.True(t, more)
	ids, more = list("/replicate/sim/list?limit=3&after=mine-2")
	require.Equal(t, []string{"mine-1", "mine-0"}, ids)
	require.False(t, more)
	ids, more = list("/replicate/" + via + "/list?limit=3")
	require.Equal(t, []string{"routed"}, ids, "the model route's: the job routed through it")
	require.False(t, more)
	r := d.do(t, http.MethodGet, "/replicate/sim/list?after=nope", "", nil)
	require.Equal(t, 400, r.status, "after names no job: %s", r.raw)
}
