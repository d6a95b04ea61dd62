package frontdoor_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/fal"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The isolation matrix: every endpoint the front door registers × (the
// caller's app's job, another app's job, an unknown id) × (act, read,
// admin) → its documented answer (docs/concepts.md "Apps"). For an app's
// tokens another app's job answers exactly as an unknown id — the same
// status and the same body, ids aside — for every verb; an admin sees
// both as the app's own token sees its job. A pattern the front door
// registers without a row here fails the test: a new endpoint states how
// it isolates apps before it ships.

const (
	ownApp   = "studio"
	otherApp = "rival"
	ownJob   = "studio-job-1"
	otherJob = "rival-job-1"
	noSuch   = "unknown-job-1"
)

// isolationRoles are the tokens of the matrix: an app's acting and
// read-only tokens, and an operator's.
var isolationRoles = map[string]string{"act": tokenAlice, "read": tokenRead, "admin": tokenBob}

// isolationRow is how one endpoint answers about a job.
type isolationRow struct {
	// method and path (with {id} for the job) and body of the request;
	// none for an endpoint that names no job.
	method, path, body string
	// own is the status each role gets about its own job (admin: either
	// job).
	own map[string]int
	// list is set for an endpoint that lists jobs: its answer names the
	// jobs the caller may see, never another app's.
	list bool
	// shared says why an endpoint names no job, for one without a path.
	shared string
}

func all3(status int) map[string]int {
	return map[string]int{"act": status, "read": status, "admin": status}
}

func acting(status int) map[string]int {
	return map[string]int{"act": status, "read": http.StatusForbidden, "admin": status}
}

// isolationRows are the matrix's rows by the pattern the front door
// registers.
var isolationRows = map[string]isolationRow{
	"/v1/jobs/{id}":                       {method: http.MethodGet, path: "/v1/jobs/{id}", own: all3(http.StatusOK)},
	"/v1/jobs/{id}/cancel":                {method: http.MethodPost, path: "/v1/jobs/{id}/cancel", body: `{"reason":"x"}`, own: acting(http.StatusConflict)},
	"/v1/jobs/{id}/resubmit":              {method: http.MethodPost, path: "/v1/jobs/{id}/resubmit", body: `{}`, own: acting(http.StatusConflict)},
	"/v1/jobs/{id}/outputs/{n}":           {method: http.MethodGet, path: "/v1/jobs/{id}/outputs/0", own: all3(http.StatusNotFound)},
	"/v1/jobs/{id}/deliveries":            {method: http.MethodGet, path: "/v1/jobs/{id}/deliveries", own: all3(http.StatusOK)},
	"/v1/jobs/{id}/events":                {method: http.MethodGet, path: "/v1/jobs/{id}/events", own: all3(http.StatusOK)},
	"/v1/jobs/cancel":                     {method: http.MethodPost, path: "/v1/jobs/cancel", body: `{"ids":["{id}"],"confirm":1}`, own: acting(http.StatusOK)},
	"/v1/jobs/resubmit":                   {method: http.MethodPost, path: "/v1/jobs/resubmit", body: `{"ids":["{id}"],"confirm":1}`, own: acting(http.StatusOK)},
	"/v1/jobs":                            {method: http.MethodGet, path: "/v1/jobs?q={id}", own: all3(http.StatusOK), list: true},
	"/v1/stream":                          {method: http.MethodGet, path: "/v1/stream", own: all3(http.StatusOK), list: true},
	"/v1/jobs/track":                      {shared: "POST tracks a job of the token's app (TestASubmissionNamesItsTokensApp); GET reads a job named track, as /v1/jobs/{id}"},
	"/v1/inputs/{id}":                     {shared: "an input file by its signed URL, for the provider: the signature is the access, no token (TestSignedInputPaths); a token names only its app's files (TestASubmissionNamesOnlyItsCallersFiles)"},
	"/v1/inputs/{id}/upload":              {shared: "a signed, single-use upload URL handed to the file's owner (TestSignedInputPaths)"},
	"/fal/.well-known/jwks.json":          {shared: "the public keys of the fal face's webhooks: public key material, no token, no job's (TestFalJWKS)"},
	"/v1/routes":                          {shared: "the routes' names, states and pauses; their counts, activity, backlog, leases and levels are the fleet's numbers, an operator's only (TestAnAppSeesNoFleetNumbers)"},
	"/v1/routes/{name}/pause":             {shared: "an operator's: refused to an app's tokens (TestOnlyAnOperatorPausesARoute)"},
	"/v1/routes/{name}/resume":            {shared: "an operator's: refused to an app's tokens (TestOnlyAnOperatorPausesARoute)"},
	"/v1/models":                          {shared: "the models' learned durations: no job's; their sample counts are the fleet's, an operator's only (TestAnAppSeesNoFleetNumbers)"},
	"/v1/spend":                           {shared: "the spend of the caller's app only, every app's to an operator (TestSpendIsPerApp)"},
	"/v1/routes/{name}/models/{model...}": {shared: "a model's learned durations: no job's; its sample and observed counts are the fleet's, an operator's only (TestAnAppSeesNoFleetNumbers)"},
	"/console/login":                      {shared: "the console's login"},
	"/console/logout":                     {shared: "the console's logout"},
	"/console/session":                    {shared: "who the browser is, its app included"},
	"/console/":                           {shared: "the console's pages; their data is the API's"},
	"/console":                            {shared: "a redirect"},
	"/{$}":                                {shared: "a redirect"},
	"/":                                   {shared: "404 for any other path"},
}

func TestIsolationMatrix(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(
		tokenAlice + " act name=alice app=" + ownApp + "\n" + tokenRead + " read app=" + ownApp + "\n" + tokenBob + " admin name=ops\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens, Console: http.NotFoundHandler(), MaxStreamDuration: 300 * time.Millisecond},
		all(withIndex, withPauses))
	require.ElementsMatch(t, slices.Collect(maps.Keys(isolationRows)), frontdoor.Patterns(d.server),
		"every endpoint the front door registers has a row of the isolation matrix, and every row an endpoint")

	now := time.Now().UTC()
	// A first event, so that the live stream's resumption after it
	// (Last-Event-ID: 1) sends both jobs'.
	d.publish(t, &state.Job{ID: "warm-up", Route: route, Model: "m", State: state.Running, CreatedAt: now}, "running", 1, state.Running)
	for _, j := range []*state.Job{
		{ID: ownJob, App: ownApp, Route: route, Model: "m", State: state.Succeeded, RemoteID: "r-1", CreatedAt: now, Outputs: []string{"https://example.com/1.mp4"}},
		{ID: otherJob, App: otherApp, Route: route, Model: "m", State: state.Succeeded, RemoteID: "r-2", CreatedAt: now, Outputs: []string{"https://example.com/2.mp4"}},
	} {
		d.storeJob(t, j)
		d.publish(t, j, "succeeded", 1, state.Succeeded)
	}
	require.Eventually(t, func() bool { n, _ := d.index.Size(); return n == 3 }, 10*time.Second, 10*time.Millisecond)

	for pattern, row := range isolationRows {
		if row.path == "" {
			require.NotEmpty(t, row.shared, "%s: a row names a job or says why it need not", pattern)
			continue
		}
		for role, token := range isolationRoles {
			ask := func(id string) (int, string) {
				return rawDo(t, d, row.method, strings.ReplaceAll(row.path, "{id}", id), strings.ReplaceAll(row.body, "{id}", id), token)
			}
			ownStatus, ownBody := ask(ownJob)
			otherStatus, otherBody := ask(otherJob)
			unknownStatus, unknownBody := ask(noSuch)
			require.Equal(t, row.own[role], ownStatus, "%s as %s, its app's job: %s", pattern, role, ownBody)
			require.NotContains(t, ownBody, `"job_not_found"`, "%s as %s: its app's job is found", pattern, role)
			if row.list {
				require.Contains(t, ownBody, ownJob, "%s as %s lists its app's job", pattern, role)
				require.Equal(t, role == "admin", strings.Contains(otherBody+ownBody, otherJob), "%s as %s: another app's job listed only to an admin", pattern, role)
				continue
			}
			switch role {
			case "admin":
				require.Equal(t, ownStatus, otherStatus, "%s as admin: another app's job as its own: %s", pattern, otherBody)
				require.NotContains(t, otherBody, `"job_not_found"`, "%s as admin", pattern)
			default:
				require.Equal(t, unknownStatus, otherStatus, "%s as %s: another app's job answers as an unknown id", pattern, role)
				require.Equal(t, strings.ReplaceAll(unknownBody, noSuch, "{id}"), strings.ReplaceAll(otherBody, otherJob, "{id}"),
					"%s as %s: another app's job answers with the body of an unknown id", pattern, role)
			}
		}
	}
}

// rawDo sends a request with a bearer token, following no redirect, and
// returns the status and body — an event stream's until it ends.
func rawDo(t *testing.T, d *door, method, path, body, token string) (int, string) {
	t.Helper()
	header := map[string]string{}
	if path == "/v1/stream" {
		header["Last-Event-ID"] = "1" // what changed since: both jobs, to whoever may see them
	}
	return send(t, d, method, path, body, header, "Bearer "+token)
}

// Every face verb that names a job — get, cancel, content, list — answers
// another app's job as the face answers an unknown id, for an app's
// tokens; an admin's sees it (the kit decides: face.Kit.Job and List).
func TestFacesIsolateApps(t *testing.T) {
	t.Parallel()
	const grace = 50 * time.Millisecond // how long an unknown id's record is waited for
	tokens, err := frontdoor.ParseTokens(strings.NewReader(
		tokenAlice + " act name=alice app=" + ownApp + "\n" + tokenRead + " read app=" + ownApp + "\n" + tokenBob + " admin name=ops\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens,
		Faces: []face.Mount{{Kind: face.Replicate, Route: route, RecordGrace: grace}, {Kind: face.Fal, Route: route, RecordGrace: grace},
			{Kind: face.OpenAI, Route: route, RecordGrace: grace}, {Kind: face.GenAI, Route: route, RecordGrace: grace},
			{Kind: face.Runway, Route: route, RecordGrace: grace}, {Kind: face.Luma, Route: route, RecordGrace: grace}}}, withIndex)
	type verb struct{ face, method, path, scheme string }
	minted := func(n byte, format func([]byte) string) string { // ids are one namespace: n differs across faces of a shape
		b := make([]byte, 16)
		b[15] = n
		return format(b)
	}
	ids := map[string]map[string]string{ // face → which → id of the face's shape
		"genai":     {"own": minted(1, face.Base32.EncodeToString), "other": minted(2, face.Base32.EncodeToString), "unknown": minted(3, face.Base32.EncodeToString)},
		"runway":    {"own": minted(1, face.UUID), "other": minted(2, face.UUID), "unknown": minted(3, face.UUID)},
		"luma":      {"own": minted(11, face.UUID), "other": minted(12, face.UUID), "unknown": minted(13, face.UUID)},
		"replicate": {"own": "ownownownownownownownownow", "other": "rivrivrivrivrivrivrivrivri", "unknown": "nonenonenonenonenonenonen2"},
		"openai":    {"own": "video_00000000000000000000000000000001", "other": "video_00000000000000000000000000000002", "unknown": "video_00000000000000000000000000000003"},
		"fal":       {"own": "00000000-0000-4000-8000-000000000001", "other": "00000000-0000-4000-8000-000000000002", "unknown": "00000000-0000-4000-8000-000000000003"},
	}
	now := time.Now().UTC()
	for f, byWhich := range ids {
		for which, app := range map[string]string{"own": ownApp, "other": otherApp} {
			md := map[string]string{face.MetaFace: f}
			if f == "fal" {
				md[fal.MetaApp] = "acme/video"
			}
			j := &state.Job{ID: byWhich[which], App: app, Route: route, Model: "acme/video", State: state.Running, RemoteID: "r-" + byWhich[which],
				Metadata: md, CreatedAt: now}
			d.storeJob(t, j)
			d.publish(t, j, "running", 1, state.Running)
		}
	}
	require.Eventually(t, func() bool { n, _ := d.index.Size(); return n == 2*len(ids) }, 10*time.Second, 10*time.Millisecond)
	falURL := func(u string) string { return "https://queue.fal.run/acme/video/requests/" + u }
	verbs := []verb{
		{"replicate", http.MethodGet, "/replicate/sim/v1/predictions/{id}", "Token"},
		{"replicate", http.MethodPost, "/replicate/sim/v1/predictions/{id}/cancel", "Token"},
		{"openai", http.MethodGet, "/openai/sim/v1/videos/{id}", "Bearer"},
		{"openai", http.MethodGet, "/openai/sim/v1/videos/{id}/content", "Bearer"},
		{"openai", http.MethodDelete, "/openai/sim/v1/videos/{id}", "Bearer"},
		{"fal", http.MethodGet, falURL("{id}") + "/status", "Key"},
		{"fal", http.MethodGet, falURL("{id}"), "Key"},
		{"fal", http.MethodPut, falURL("{id}") + "/cancel", "Key"},
		{"genai", http.MethodGet, "/genai/sim/v1beta/models/veo-3/operations/{id}", "Bearer"},
		{"genai", http.MethodGet, "/genai/sim/v1beta/files/{id}0:download", "Bearer"},
		{"runway", http.MethodGet, "/runway/sim/v1/tasks/{id}", "Bearer"},
		{"runway", http.MethodDelete, "/runway/sim/v1/tasks/{id}", "Bearer"},
		{"luma", http.MethodGet, "/luma/sim/generations/{id}", "Bearer"},
		{"luma", http.MethodDelete, "/luma/sim/generations/{id}", "Bearer"},
	}
	for _, k := range face.Kinds {
		require.Contains(t, ids, string(k), "face %s has rows of the isolation matrix", k)
	}
	for _, v := range verbs {
		for role, token := range isolationRoles {
			if role == "read" && v.method != http.MethodGet {
				continue // refused before any job is looked at: TestAReadTokenMayNotActThroughAFace
			}
			ask := func(id string) (int, string) {
				req := strings.ReplaceAll(v.path, "{id}", id)
				path, hdr := req, map[string]string{}
				switch v.face {
				case "fal":
					path, hdr["x-fal-target-url"] = "/fal/sim/", req
				case "runway":
					hdr["X-Runway-Version"] = "2024-11-06"
				}
				return faceDo(t, d, v.method, path, hdr, v.scheme+" "+token)
			}
			own, ownBody := ask(ids[v.face]["own"])
			other, otherBody := ask(ids[v.face]["other"])
			unknown, unknownBody := ask(ids[v.face]["unknown"])
			require.NotEqual(t, strings.ReplaceAll(unknownBody, ids[v.face]["unknown"], "{id}"), strings.ReplaceAll(ownBody, ids[v.face]["own"], "{id}"),
				"%s %s as %s: its app's job is found", v.method, v.path, role)
			if role == "admin" {
				require.Equal(t, own, other, "%s %s as admin: %s", v.method, v.path, otherBody)
				continue
			}
			require.Equal(t, unknown, other, "%s %s as %s: %s", v.method, v.path, role, otherBody)
			require.Equal(t, strings.ReplaceAll(unknownBody, ids[v.face]["unknown"], "{id}"), strings.ReplaceAll(otherBody, ids[v.face]["other"], "{id}"),
				"%s %s as %s: the body of an unknown id", v.method, v.path, role)
		}
	}
	// The lists: an app's token lists its own, an admin's both.
	for role, token := range isolationRoles {
		for f, path := range map[string]string{"replicate": "/replicate/sim/v1/predictions", "openai": "/openai/sim/v1/videos", "luma": "/luma/sim/generations"} {
			scheme := map[string]string{"replicate": "Token", "openai": "Bearer", "luma": "Bearer"}[f]
			status, body := faceDo(t, d, http.MethodGet, path, nil, scheme+" "+token)
			require.Equal(t, http.StatusOK, status, "%s list as %s: %s", f, role, body)
			require.Contains(t, body, ids[f]["own"], "%s list as %s", f, role)
			require.Equal(t, role == "admin", strings.Contains(body, ids[f]["other"]), "%s list as %s: another app's job only to an admin", f, role)
		}
	}
}

func faceDo(t *testing.T, d *door, method, path string, header map[string]string, auth string) (int, string) {
	t.Helper()
	return send(t, d, method, path, "", header, auth)
}

// send sends a request with the Authorization auth and the headers,
// following no redirect, and returns its status and body, bounded.
func send(t *testing.T, d *door, method, path, body string, header map[string]string, auth string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, d.url+path, rd)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", auth)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// A job created through the front door is its token's app's: the
// submission says so; one naming another app is refused, naming the
// field; an admin's may name any configured app, and none else; the same
// idempotency key in two apps is two jobs.
func TestASubmissionNamesItsTokensApp(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(
		tokenAlice + " act name=alice app=" + ownApp + "\n" + tokenRead + " act app=" + otherApp + "\n" + tokenBob + " admin name=ops\n"))
	require.NoError(t, err)
	d := setup(t, frontdoor.Config{Tokens: tokens, Apps: []string{ownApp, otherApp}})
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	submit := func(tok, app, key string) reply {
		body := `{"route":"sim","v":1,"model":"m","input":{},"idempotency_key":"` + key + `"`
		if app != "" {
			body += `,"app":"` + app + `"`
		}
		return d.do(t, http.MethodPost, "/v1/jobs", body+"}", bearer(tok))
	}
	r := submit(tokenAlice, "", "k-1")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Contains(t, string(d.lastIntake(t, d.ns.Submit(route))), `"app":"`+ownApp+`"`)
	ownID := r.body["id"]

	requireError(t, submit(tokenAlice, otherApp, "k-2"), http.StatusBadRequest, frontdoor.CodeInvalidField, "app")
	r = submit(tokenRead, "", "k-1")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.NotEqual(t, ownID, r.body["id"], "another app's same key is another job")

	r = submit(tokenBob, otherApp, "k-3")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Contains(t, string(d.lastIntake(t, d.ns.Submit(route))), `"app":"`+otherApp+`"`)
	requireError(t, submit(tokenBob, "nobody", "k-4"), http.StatusBadRequest, frontdoor.CodeInvalidField, "app")

	track := `{"route":"sim","v":1,"remote_id":"r-9","model":"m","app":"` + otherApp + `"}`
	requireError(t, d.do(t, http.MethodPost, "/v1/jobs/track", track, bearer(tokenAlice)), http.StatusBadRequest, frontdoor.CodeInvalidField, "app")
}

// Pausing a route stops every app's jobs on it: only an operator may.
func TestOnlyAnOperatorPausesARoute(t *testing.T) {
	t.Parallel()
	d := actionDoor(t, tokenAlice+" act name=alice app="+ownApp, tokenBob+" admin name=ops")
	for _, action := range []string{"pause", "resume"} {
		r := d.do(t, http.MethodPost, "/v1/routes/sim/"+action, `{"reason":"x"}`, map[string]string{"Authorization": "Bearer " + tokenAlice})
		requireError(t, r, http.StatusForbidden, frontdoor.CodeForbidden, "")
		r = d.do(t, http.MethodPost, "/v1/routes/sim/"+action, `{"reason":"x"}`, map[string]string{"Authorization": "Bearer " + tokenBob})
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	}
}

// A tokens file names each token's app: app=, else its name; app=* sees
// every app; with apps configured, a token of another app — or of none,
// but an admin's — is refused when the front door starts.
func TestTokensNameTheirApp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ content, want string }{
		{tokenA + " app=a app=b\n", "line 1: app= is given once"},
		{tokenA + " app=no/slash\n", "line 1: app= is given once, 1 to 64 characters"},
		{tokenA + " name=alice@example\n", "line 1: the token's app is its name"},
		{tokenA + " app=* app=x\n", "line 1: app= is given once"},
		{tokenA + " admin app=x\n", "line 1: an admin sees every app"},
	} {
		_, err := frontdoor.ParseTokens(strings.NewReader(tc.content))
		require.ErrorContains(t, err, tc.want)
	}
	_, err := frontdoor.ParseTokens(strings.NewReader(tokenA + " name=alice@example app=alice\n" + tokenB + " read app=*\n"))
	require.NoError(t, err)

	s := setup(t, frontdoor.Config{})
	for _, tc := range []struct{ content, want string }{
		{tokenA + " app=nobody\n", `app "nobody" is not one of the configured apps`},
		{tokenA + "\n", "a token that is not an admin's names its app"},
	} {
		tokens, err := frontdoor.ParseTokens(strings.NewReader(tc.content))
		require.NoError(t, err)
		_, err = frontdoor.New(frontdoor.Config{Routes: []string{route}, Tokens: tokens, Apps: []string{ownApp}}, s.js, s.ns, s.res, s.jobs)
		require.ErrorContains(t, err, tc.want)
	}
}
