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
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenA + " read name=dashboard\n"))
	require.NoError(t, err)
	// The job's id is one the OpenAI face would mint, and its metadata
	// says the face made it, so its content endpoint serves it too.
	const jobID = "video_00112233445566778899aabbccddeeff"
	d := setup(t, frontdoor.Config{Tokens: tokens, Faces: []face.Mount{{Kind: face.OpenAI, Route: route}}})
	bearer := map[string]string{"Authorization": "Bearer " + tokenA}

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

	// A prediction at the provider, and its job ending with its output.
	resp, err := http.Post(provider.URL+"/v1/predictions", "application/json", strings.NewReader(`{"version":"owner/model:v","input":{}}`))
	require.NoError(t, err)
	var p struct {
		ID     string   `json:"id"`
		Status string   `json:"status"`
		Output []string `json:"output"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	_ = resp.Body.Close()
	require.Eventually(t, func() bool {
		resp, err := http.Get(provider.URL + "/v1/predictions/" + p.ID)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&p) == nil && p.Status == sim.StatusSucceeded
	}, 10*time.Second, 5*time.Millisecond)

	r := d.do(t, http.MethodGet, "/v1/jobs/"+jobID+"/outputs/0", "", bearer)
	requireError(t, r, http.StatusNotFound, frontdoor.CodeJobNotFound, "")
	now := time.Now().UTC()
	j := &state.Job{ID: jobID, Route: route, Model: "m", RemoteID: p.ID, State: state.Queued, Tracked: true,
		Metadata: map[string]string{face.MetaFace: string(face.OpenAI)}, CreatedAt: now, SubmittedAt: now, ChangedAt: now, Deadline: now.Add(time.Hour), NextCheckAt: now.Add(time.Hour)}
	j.Record(events.EventSubmitted, now)
	_, _, err = d.jobs.Intake().Accept(t.Context(), j)
	require.NoError(t, err)
	_, err = d.jobs.Webhooks().Webhook(t.Context(), jobs.Notice{Route: route, JobID: jobID, DeliveryID: "d1", RemoteID: p.ID,
		Obs: state.Observation{State: state.Succeeded, Raw: "succeeded", Outputs: []string{p.Output[0], provider.URL + "/nothing.mp4"},
			OutputsExpireAt: now.Add(2 * time.Hour)}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		j, err := d.jobs.Get(t.Context(), jobID)
		return err == nil && j.Custody != nil && !j.Custody.SavedAt.IsZero()
	}, 20*time.Second, 10*time.Millisecond)

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
