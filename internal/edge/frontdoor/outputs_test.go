package frontdoor_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/custody"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A kept output is served byte for byte — the simulated provider's file,
// copied by output custody — with its media type, length and digest, to a
// read-only token; an output not kept is 404 output_not_kept.
func TestKeptOutputsAreServed(t *testing.T) {
	t.Parallel()
	const size = 700_000 // several object store chunks
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenA + " read app=team\n"))
	require.NoError(t, err)
	// The job's id is one the OpenAI face would mint, and its metadata
	// says the face made it, so its content endpoint serves it too.
	const jobID = "video_00112233445566778899aabbccddeeff"
	d := setup(t, frontdoor.Config{Tokens: tokens, Faces: []face.Mount{{Kind: face.OpenAI, Route: route}}})
	bearer := map[string]string{"Authorization": "Bearer " + tokenA}

	providerURL := keeping(t, d, size)
	p := predicted(t, providerURL)

	r := d.do(t, http.MethodGet, "/v1/jobs/"+jobID+"/outputs/0", "", bearer)
	requireError(t, r, http.StatusNotFound, frontdoor.CodeJobNotFound, "")
	d.succeed(t, jobID, map[string]string{face.MetaFace: string(face.OpenAI)}, p.ID, p.Output[0], providerURL+"/nothing.mp4")

	req, err := http.NewRequest(http.MethodGet, d.url+"/v1/jobs/"+jobID+"/outputs/0", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	got, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(got.Body)
	_ = got.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode, "%s", body)
	want := sim.OutputFile(p.ID, size)
	require.True(t, string(want) == string(body), "byte for byte (%d bytes, want %d)", len(body), size)
	require.Equal(t, "video/mp4", got.Header.Get("Content-Type"))
	require.Equal(t, "700000", got.Header.Get("Content-Length"))
	sum := sha256.Sum256(want)
	require.Equal(t, `"SHA-256=`+base64.URLEncoding.EncodeToString(sum[:])+`"`, got.Header.Get("ETag"))
	require.Equal(t, "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":", got.Header.Get("Repr-Digest"))

	req.Header.Set("If-None-Match", got.Header.Get("ETag"))
	again, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = again.Body.Close()
	require.Equal(t, http.StatusNotModified, again.StatusCode)

	r = d.do(t, http.MethodGet, "/v1/jobs/"+jobID+"/outputs/1", "", bearer)
	requireError(t, r, http.StatusNotFound, frontdoor.CodeOutputNotKept, "")
	require.Contains(t, r.body["error"].(map[string]any)["message"], "gone")
	r = d.do(t, http.MethodGet, "/v1/jobs/"+jobID+"/outputs/2", "", bearer)
	requireError(t, r, http.StatusNotFound, frontdoor.CodeOutputNotKept, "")
	r = d.do(t, http.MethodGet, "/v1/jobs/"+jobID+"/outputs/01", "", bearer)
	requireError(t, r, http.StatusBadRequest, frontdoor.CodeInvalidParameter, "n")
	r = d.do(t, http.MethodGet, "/v1/jobs/"+jobID+"/outputs/0", "", nil)
	requireError(t, r, http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")

	// The OpenAI face's content is the kept bytes, not a redirect to the
	// provider.
	req, err = http.NewRequest(http.MethodGet, d.url+"/openai/"+route+"/v1/videos/"+jobID+"/content", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	viaFace, err := noRedirect.Do(req)
	require.NoError(t, err)
	body, err = io.ReadAll(viaFace.Body)
	_ = viaFace.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, viaFace.StatusCode, "%s", body)
	require.True(t, string(want) == string(body), "the face serves the kept bytes (%d bytes, want %d)", len(body), size)
}

// keeping runs output custody for the door's route over a simulated
// provider whose outputs are size bytes, until the test ends, and returns
// the provider's URL.
func keeping(t *testing.T, d *door, size int64) string {
	t.Helper()
	s, err := sim.New(sim.Config{OutputBytes: size,
		Default: sim.Model{QueueMedian: sim.Duration(time.Millisecond), RunMedian: sim.Duration(time.Millisecond)}})
	require.NoError(t, err)
	provider := httptest.NewServer(s.Handler())
	t.Cleanup(provider.Close)
	keep, err := custody.New(custody.Config{Routes: map[string]config.KeepOutputs{route: {AllowPrivate: true}}}, d.js, d.ns, d.jobs.Custody())
	require.NoError(t, err)
	background(t, func(ctx context.Context, ready chan<- struct{}) error {
		close(ready)
		return keep.Run(ctx)
	})
	require.Eventually(t, func() bool {
		_, err := d.res.Events.Consumer(t.Context(), d.ns.Prefix()+"-custody-copy")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "custody runs")
	return provider.URL
}

// prediction is a prediction at the simulated provider.
type prediction struct {
	ID     string   `json:"id"`
	Status string   `json:"status"`
	Output []string `json:"output"`
}

// predicted makes a prediction at the simulated provider at url and
// returns it once it has succeeded.
func predicted(t *testing.T, url string) prediction {
	t.Helper()
	resp, err := http.Post(url+"/v1/predictions", "application/json", strings.NewReader(`{"version":"owner/model:v","input":{}}`))
	require.NoError(t, err)
	var p prediction
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	_ = resp.Body.Close()
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/v1/predictions/" + p.ID)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&p) == nil && p.Status == sim.StatusSucceeded
	}, 10*time.Second, 5*time.Millisecond)
	return p
}

// succeed makes job id (with metadata md) of remote job remote on the
// door's route, ends it succeeded with outputs, and waits until output
// custody has recorded what it kept of them.
func (d *door) succeed(t *testing.T, id string, md map[string]string, remote string, outputs ...string) {
	t.Helper()
	now := time.Now().UTC()
	j := &state.Job{ID: id, Route: route, Model: "m", RemoteID: remote, State: state.Queued, Tracked: true, Metadata: md, App: testApp,
		CreatedAt: now, SubmittedAt: now, ChangedAt: now, Deadline: now.Add(time.Hour), NextCheckAt: now.Add(time.Hour)}
	j.Record(events.EventSubmitted, now)
	_, _, err := d.jobs.Intake().Accept(t.Context(), j)
	require.NoError(t, err)
	_, err = d.jobs.Webhooks().Webhook(t.Context(), jobs.Notice{Route: route, JobID: id, DeliveryID: "d-" + id, RemoteID: remote,
		Obs: state.Observation{State: state.Succeeded, Raw: "succeeded", Outputs: outputs, OutputsExpireAt: now.Add(2 * time.Hour)}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		j, err := d.jobs.Get(t.Context(), id)
		return err == nil && j.Custody != nil && !j.Custody.SavedAt.IsZero()
	}, 20*time.Second, 10*time.Millisecond)
}

// fetch GETs url with the bearer token and returns the status and body.
func fetch(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

// The Replicate and fal faces link a kept output to the front door, not
// to the provider, whose copy dies with its retention: the link serves
// the bytes output custody kept, byte for byte, to the app's token; an
// output not kept is linked to the provider.
func TestFacesLinkKeptOutputs(t *testing.T) {
	t.Parallel()
	const size = 300_000
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenA + " read app=team\n"))
	require.NoError(t, err)
	d := setup(t, frontdoor.Config{Tokens: tokens, KeepOutputs: []string{route},
		Faces: []face.Mount{{Kind: face.Replicate, Route: route}, {Kind: face.Fal, Route: route}}})
	providerURL := keeping(t, d, size)
	bearer := map[string]string{"Authorization": "Bearer " + tokenA}

	rp := predicted(t, providerURL)
	const repID = "keptoutputsabcdefghijklmno"
	d.succeed(t, repID, map[string]string{face.MetaFace: string(face.Replicate)}, rp.ID, rp.Output[0], providerURL+"/nothing.mp4")
	r := d.do(t, http.MethodGet, "/replicate/"+route+"/v1/predictions/"+repID, "", bearer)
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, []any{d.url + "/replicate/" + route + "/outputs/" + repID + "/0", providerURL + "/nothing.mp4"}, r.body["output"],
		"the kept output on the face; the one custody found gone, the provider's")
	code, body := fetch(t, d.url+"/replicate/"+route+"/outputs/"+repID+"/0", tokenA)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.True(t, string(sim.OutputFile(rp.ID, size)) == string(body), "byte for byte (%d bytes)", len(body))
	code, _ = fetch(t, d.url+"/replicate/"+route+"/outputs/"+repID+"/0", "not-a-token")
	require.Equal(t, http.StatusUnauthorized, code, "the link takes the app's token")

	fp := predicted(t, providerURL)
	const falID = "0b5e3c1a-4d2f-4a6b-8c9d-0e1f2a3b4c5d"
	d.succeed(t, falID, map[string]string{face.MetaFace: string(face.Fal), "fal_app": "acme/video"}, fp.ID, fp.Output[0])
	r = d.do(t, http.MethodGet, "/fal/"+route+"/", "", map[string]string{"Authorization": "Key " + tokenA,
		"x-fal-target-url": "https://queue.fal.run/acme/video/requests/" + falID})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	video := r.body["video"].(map[string]any)
	require.Equal(t, d.url+"/fal/"+route+"/outputs/"+falID+"/0", video["url"])
	require.Equal(t, "video/mp4", video["content_type"], "the type custody kept")
	code, body = fetch(t, video["url"].(string), tokenA)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.True(t, string(sim.OutputFile(fp.ID, size)) == string(body), "byte for byte (%d bytes)", len(body))
}
