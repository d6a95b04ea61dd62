package frontdoor_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/state"
)

// faceVerb is a request to a face that acts: a create or a cancel.
type faceVerb struct {
	face, name   string
	method, path string
	body, ctype  string
	header       map[string]string
	job          string // the running job a cancel names ("" for a create)
	meta         map[string]string
	forbidden    func(t *testing.T, h http.Header, body []byte) // the 403 in the face's own shape
	cancel       bool
}

// faceVerbs are every acting verb of every face.
func faceVerbs(t *testing.T) []faceVerb {
	t.Helper()
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	require.NoError(t, mw.WriteField("prompt", "a lighthouse"))
	require.NoError(t, mw.Close())
	var upload bytes.Buffer
	uw := multipart.NewWriter(&upload)
	fw, err := uw.CreateFormFile("content", "a.png")
	require.NoError(t, err)
	_, _ = fw.Write([]byte("\x89PNG\r\n\x1a\n"))
	require.NoError(t, uw.Close())
	const (
		repID = "forbiddenabcdefghijklmnopq"
		falID = "6f6f6f6f-6f6f-4f6f-8f6f-6f6f6f6f6f6f"
		oaiID = "video_6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f"
		rwyID = "6f6f6f6f-6f6f-4f6f-8f6f-6f6f6f6f6f70"
		lumID = "6f6f6f6f-6f6f-4f6f-8f6f-6f6f6f6f6f71"
	)
	replicate := func(t *testing.T, h http.Header, body []byte) {
		require.Equal(t, "application/problem+json", h.Get("Content-Type"))
		var p struct {
			Title, Detail string
			Status        int
		}
		require.NoError(t, json.Unmarshal(body, &p))
		require.Equal(t, http.StatusForbidden, p.Status)
		require.Equal(t, "Permission denied", p.Title)
		require.Contains(t, p.Detail, "read-only")
	}
	fal := func(t *testing.T, h http.Header, body []byte) {
		require.Equal(t, "application/json", h.Get("Content-Type"))
		var e struct{ Detail, Message string }
		require.NoError(t, json.Unmarshal(body, &e))
		require.Contains(t, e.Detail, "read-only")
		require.Equal(t, e.Detail, e.Message, "the fal client's error message")
	}
	openai := func(t *testing.T, h http.Header, body []byte) {
		require.Equal(t, "application/json", h.Get("Content-Type"))
		var e struct {
			Error struct{ Message, Type, Code string }
		}
		require.NoError(t, json.Unmarshal(body, &e))
		require.Equal(t, "insufficient_permissions", e.Error.Code, "the SDK's PermissionDeniedError")
		require.Equal(t, "invalid_request_error", e.Error.Type)
		require.Contains(t, e.Error.Message, "read-only")
	}
	genai := func(t *testing.T, h http.Header, body []byte) {
		var e struct {
			Error struct {
				Code            int
				Message, Status string
			}
		}
		require.NoError(t, json.Unmarshal(body, &e))
		require.Equal(t, http.StatusForbidden, e.Error.Code)
		require.Equal(t, "PERMISSION_DENIED", e.Error.Status)
		require.Contains(t, e.Error.Message, "read-only")
	}
	runway := func(t *testing.T, h http.Header, body []byte) {
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal(body, &e))
		require.Contains(t, e.Error, "read-only")
	}
	luma := func(t *testing.T, h http.Header, body []byte) {
		var e struct{ Detail string }
		require.NoError(t, json.Unmarshal(body, &e))
		require.Contains(t, e.Detail, "read-only")
	}
	version := map[string]string{"X-Runway-Version": "2024-11-06"}
	target := func(u string) map[string]string { return map[string]string{"x-fal-target-url": u} }
	made := func(k face.Kind, more ...string) map[string]string {
		md := map[string]string{face.MetaFace: string(k)}
		for i := 0; i+1 < len(more); i += 2 {
			md[more[i]] = more[i+1]
		}
		return md
	}
	return []faceVerb{
		{face: "replicate", name: "create a version's prediction", method: http.MethodPost, path: "/replicate/sim/v1/predictions",
			body: `{"version":"acme/video:v1","input":{}}`, ctype: "application/json", forbidden: replicate},
		{face: "replicate", name: "create a model's prediction", method: http.MethodPost, path: "/replicate/sim/v1/models/acme/video/predictions",
			body: `{"input":{}}`, ctype: "application/json", forbidden: replicate},
		{face: "replicate", name: "cancel", method: http.MethodPost, path: "/replicate/sim/v1/predictions/" + repID + "/cancel",
			job: repID, meta: made(face.Replicate), forbidden: replicate, cancel: true},
		{face: "fal", name: "submit", method: http.MethodPost, path: "/fal/sim/", header: target("https://queue.fal.run/acme/video"),
			body: `{}`, ctype: "application/json", forbidden: fal},
		{face: "replicate", name: "upload a file", method: http.MethodPost, path: "/replicate/sim/v1/files",
			body: upload.String(), ctype: uw.FormDataContentType(), forbidden: replicate},
		{face: "replicate", name: "delete a file", method: http.MethodDelete, path: "/replicate/sim/v1/files/" + strings.Repeat("ab", 16), forbidden: replicate},
		{face: "fal", name: "initiate an upload", method: http.MethodPost, path: "/fal/sim/", header: target("https://rest.fal.ai/storage/upload/initiate?storage_type=fal-cdn-v3"),
			body: `{"content_type":"image/png","file_name":"a.png"}`, ctype: "application/json", forbidden: fal},
		{face: "fal", name: "cancel", method: http.MethodPut, path: "/fal/sim/", header: target("https://queue.fal.run/acme/video/requests/" + falID + "/cancel"),
			job: falID, meta: made(face.Fal, "fal_app", "acme/video"), forbidden: fal, cancel: true},
		{face: "openai", name: "create", method: http.MethodPost, path: "/openai/sim/v1/videos",
			body: form.String(), ctype: mw.FormDataContentType(), forbidden: openai},
		{face: "openai", name: "delete", method: http.MethodDelete, path: "/openai/sim/v1/videos/" + oaiID,
			job: oaiID, meta: made(face.OpenAI), forbidden: openai, cancel: true},
		{face: "genai", name: "generate (Gemini API)", method: http.MethodPost, path: "/genai/sim/v1beta/models/veo-3:predictLongRunning",
			body: `{"instances":[{"prompt":"p"}]}`, ctype: "application/json", forbidden: genai},
		{face: "genai", name: "generate (Vertex AI)", method: http.MethodPost, path: "/genai/sim/v1beta1/publishers/google/models/veo-3:predictLongRunning",
			body: `{"instances":[{"prompt":"p"}]}`, ctype: "application/json", forbidden: genai},
		{face: "runway", name: "image to video", method: http.MethodPost, path: "/runway/sim/v1/image_to_video", header: version,
			body: `{"model":"gen4_turbo","promptImage":"https://example.com/a.png"}`, ctype: "application/json", forbidden: runway},
		{face: "runway", name: "delete", method: http.MethodDelete, path: "/runway/sim/v1/tasks/" + rwyID, header: version,
			job: rwyID, meta: made(face.Runway), forbidden: runway, cancel: true},
		{face: "luma", name: "create a video", method: http.MethodPost, path: "/luma/sim/generations/video",
			body: `{"model":"ray-2","prompt":"p"}`, ctype: "application/json", forbidden: luma},
		{face: "luma", name: "create an image", method: http.MethodPost, path: "/luma/sim/generations/image",
			body: `{"model":"photon-1","prompt":"p"}`, ctype: "application/json", forbidden: luma},
		{face: "luma", name: "delete", method: http.MethodDelete, path: "/luma/sim/generations/" + lumID,
			job: lumID, meta: made(face.Luma), forbidden: luma, cancel: true},
	}
}

// send sends v with the token in the face's scheme and returns the
// response's status, headers and body.
func (v faceVerb) send(t *testing.T, d *door, token string) (int, http.Header, []byte) {
	t.Helper()
	var body io.Reader
	if v.body != "" {
		body = strings.NewReader(v.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), v.method, d.url+v.path, body)
	require.NoError(t, err)
	if v.ctype != "" {
		req.Header.Set("Content-Type", v.ctype)
	}
	for k, val := range v.header {
		req.Header.Set(k, val)
	}
	if v.face == "genai" {
		req.Header.Set("x-goog-api-key", token) // what @google/genai sends
	} else {
		scheme := map[string]string{"replicate": "Token", "fal": "Key"}[v.face]
		req.Header.Set("Authorization", cmp.Or(scheme, "Bearer")+" "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

// A read-only token may read through a face but not act: every face's
// every acting verb — a create, a cancel, a delete — is answered 403 in
// the face's own shape (which its SDK throws as its permission error), and
// nothing is submitted or canceled; the same cancel with an acting token
// cancels, so the job was there to cancel.
func TestAReadTokenMayNotActThroughAFace(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=app\n" + tokenRead + " read name=dashboard\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens,
		Faces: allFaces(route)}, withIndex)
	verbs := faceVerbs(t)
	faces := map[string]bool{}
	for _, v := range verbs {
		faces[v.face] = true
		if v.job == "" {
			continue
		}
		_, created, err := d.jobs.Intake().Accept(t.Context(), &state.Job{ID: v.job, Route: route, Model: "acme/video", RemoteID: "r-" + v.job,
			State: state.Running, Metadata: v.meta, CreatedAt: time.Now().UTC(), App: "app"})
		require.NoError(t, err)
		require.True(t, created)
	}
	require.Len(t, faces, len(face.Kinds), "every face")

	for _, v := range verbs {
		status, h, body := v.send(t, d, tokenRead)
		require.Equal(t, http.StatusForbidden, status, "%s %s: %s", v.face, v.name, body)
		v.forbidden(t, h, body)
	}
	info, err := d.res.Intake.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing was submitted or canceled")

	for _, v := range verbs {
		if !v.cancel {
			continue
		}
		status, _, body := v.send(t, d, tokenAlice)
		require.Contains(t, []int{http.StatusOK, http.StatusAccepted, http.StatusNoContent}, status, "%s %s with an acting token: %s", v.face, v.name, body)
	}
	info, err = d.res.Intake.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 5, info.State.Msgs, "each acting token's cancel was published")
}

// allFaces mounts every face on route.
func allFaces(route string) []face.Mount {
	var m []face.Mount
	for _, k := range face.Kinds {
		m = append(m, face.Mount{Kind: k, Route: route})
	}
	return m
}

// The genai face's SDK sends its key as x-goog-api-key: a Pollux token
// there is read on the genai face's paths, and nowhere else; a wrong one
// is a 401 in Google's shape.
func TestTheGenAIKeyHeaderIsATokenOnItsFaceOnly(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=app\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens, Faces: allFaces(route)}, withIndex)
	const op = "/genai/sim/v1beta/models/veo-3/operations/abcdefghijklmnopqrstuvwxyz"
	r := d.do(t, http.MethodGet, op, "", map[string]string{"x-goog-api-key": tokenAlice})
	require.Equal(t, http.StatusNotFound, r.status, "read with the key: an unknown operation: %s", r.raw)
	require.Equal(t, "NOT_FOUND", r.body["error"].(map[string]any)["status"])

	r = d.do(t, http.MethodGet, op, "", map[string]string{"x-goog-api-key": "not-a-pollux-token-at-all"})
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.raw)
	require.Equal(t, "UNAUTHENTICATED", r.body["error"].(map[string]any)["status"])

	for _, path := range []string{"/v1/jobs/abc", "/openai/sim/v1/videos/video_0123456789abcdef0123456789abcdef", "/runway/sim/v1/tasks/x"} {
		r = d.do(t, http.MethodGet, path, "", map[string]string{"x-goog-api-key": tokenAlice, "X-Runway-Version": "2024-11-06"})
		require.Equal(t, http.StatusUnauthorized, r.status, "%s: the header is no token there: %s", path, r.raw)
	}
}
