package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// faceApp is an app on one face: how it creates a job, and what it sees
// when it polls it — an HTTP status and a status in the face's words.
type faceApp struct {
	name string
	// create makes a job and returns its id.
	create func(t *testing.T, base string, i int) string
	// poll asks about job id and returns the HTTP status, the face's
	// status and whether the job has ended for the app.
	poll func(t *testing.T, base, id string) (code int, status string, ended bool)
	// codes and words are what the face may answer a poll, in its own
	// vocabulary.
	codes []int
	words []string
}

// send sends a request and decodes the JSON answer.
func send(t *testing.T, method, url, ctype string, body []byte, header map[string]string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "%s %s: %d %s", method, url, resp.StatusCode, raw)
	return resp.StatusCode, m
}

// faceApps are an app on each face of route sim, of model acme/video.
func faceApps() []faceApp {
	const route = "/" + dev.RouteName
	falTarget := func(suffix string) map[string]string {
		return map[string]string{"x-fal-target-url": "https://queue.fal.run/acme/video" + suffix}
	}
	return []faceApp{{
		name: "replicate",
		create: func(t *testing.T, base string, i int) string {
			code, p := send(t, http.MethodPost, base+"/replicate"+route+"/v1/models/acme/video/predictions", "application/json",
				fmt.Appendf(nil, `{"input":{"prompt":"clip %d"}}`, i), nil)
			require.Equal(t, http.StatusCreated, code, "%v", p)
			return p["id"].(string)
		},
		poll: func(t *testing.T, base, id string) (int, string, bool) {
			code, p := send(t, http.MethodGet, base+"/replicate"+route+"/v1/predictions/"+id, "", nil, nil)
			s, _ := p["status"].(string)
			return code, s, s == "succeeded" || s == "failed" || s == "canceled"
		},
		codes: []int{http.StatusOK},
		words: []string{"starting", "processing", "succeeded", "failed", "canceled"},
	}, {
		name: "fal",
		create: func(t *testing.T, base string, i int) string {
			code, s := send(t, http.MethodPost, base+"/fal"+route+"/", "application/json", fmt.Appendf(nil, `{"prompt":"clip %d"}`, i), falTarget(""))
			require.Equal(t, http.StatusOK, code, "%v", s)
			return s["request_id"].(string)
		},
		poll: func(t *testing.T, base, id string) (int, string, bool) {
			code, s := send(t, http.MethodGet, base+"/fal"+route+"/", "", nil, falTarget("/requests/"+id+"/status"))
			st, _ := s["status"].(string)
			if st != "COMPLETED" {
				return code, st, false
			}
			// The client then asks for the result: the output, or fal's own
			// error for the job's end — never the provider's.
			rc, r := send(t, http.MethodGet, base+"/fal"+route+"/", "", nil, falTarget("/requests/"+id))
			switch rc {
			case http.StatusOK:
				require.Contains(t, r, "files", "a result: %v", r)
			case http.StatusUnprocessableEntity, 499, http.StatusInternalServerError, http.StatusGatewayTimeout:
				et, _ := r["error_type"].(string)
				require.True(t, rc == http.StatusUnprocessableEntity ||
					slices.Contains([]string{"runner_server_error", "client_cancelled", "request_timeout", "internal_error"}, et),
					"a fal error of a job's end: %d %v", rc, r)
			default:
				t.Errorf("fal result of %s: %d %v, not an answer fal gives for a job that ended", id, rc, r)
			}
			return code, st, true
		},
		codes: []int{http.StatusOK, http.StatusAccepted},
		words: []string{"IN_QUEUE", "IN_PROGRESS", "COMPLETED"},
	}, {
		name: "openai",
		create: func(t *testing.T, base string, i int) string {
			var form bytes.Buffer
			mw := multipart.NewWriter(&form)
			require.NoError(t, mw.WriteField("model", "acme/video"))
			require.NoError(t, mw.WriteField("prompt", fmt.Sprintf("clip %d", i)))
			require.NoError(t, mw.Close())
			code, v := send(t, http.MethodPost, base+"/openai"+route+"/v1/videos", mw.FormDataContentType(), form.Bytes(), nil)
			require.Equal(t, http.StatusOK, code, "%v", v)
			return v["id"].(string)
		},
		poll: func(t *testing.T, base, id string) (int, string, bool) {
			code, v := send(t, http.MethodGet, base+"/openai"+route+"/v1/videos/"+id, "", nil, nil)
			s, _ := v["status"].(string)
			if s == "failed" {
				e, _ := v["error"].(map[string]any)
				require.Contains(t, []any{"video_generation_failed", "video_canceled", "video_expired", "video_lost"}, e["code"], "%v", v)
			}
			return code, s, s == "completed" || s == "failed"
		},
		codes: []int{http.StatusOK},
		words: []string{"queued", "in_progress", "completed", "failed"},
	}, {
		name: "genai",
		create: func(t *testing.T, base string, i int) string {
			code, op := send(t, http.MethodPost, base+"/genai"+route+"/v1beta1/publishers/acme/models/video:predictLongRunning", "application/json",
				fmt.Appendf(nil, `{"instances":[{"prompt":"clip %d"}]}`, i), nil)
			require.Equal(t, http.StatusOK, code, "%v", op)
			name := op["name"].(string)
			return name[strings.LastIndexByte(name, '/')+1:]
		},
		poll: func(t *testing.T, base, id string) (int, string, bool) {
			code, op := send(t, http.MethodGet, base+"/genai"+route+"/v1beta/models/video/operations/"+id, "", nil, nil)
			switch {
			case op["error"] != nil:
				e, _ := op["error"].(map[string]any)
				require.Contains(t, []any{13.0, 1.0, 4.0, 2.0}, e["code"], "%v", op) // google.rpc codes of a job's end
				return code, "error", true
			case op["done"] == true:
				return code, "done", true
			}
			return code, "running", false
		},
		codes: []int{http.StatusOK},
		words: []string{"running", "done", "error"},
	}, {
		name: "luma",
		create: func(t *testing.T, base string, i int) string {
			code, g := send(t, http.MethodPost, base+"/luma"+route+"/generations/video", "application/json",
				fmt.Appendf(nil, `{"model":"acme/video","prompt":"clip %d"}`, i), nil)
			require.Equal(t, http.StatusCreated, code, "%v", g)
			return g["id"].(string)
		},
		poll: func(t *testing.T, base, id string) (int, string, bool) {
			code, g := send(t, http.MethodGet, base+"/luma"+route+"/generations/"+id, "", nil, nil)
			s, _ := g["state"].(string)
			return code, s, s == "completed" || s == "failed"
		},
		codes: []int{http.StatusOK},
		words: []string{"queued", "dreaming", "completed", "failed"},
	}}
}

// Apps polling the faces while the provider answers Pollux 429s (with
// Retry-After), 5xx, malformed bodies and flapping 404s, and loses jobs:
// every answer a face gives them is in the face's own vocabulary — its
// HTTP statuses and its job statuses — never the provider's 429 or 5xx,
// since a face answers from Pollux's records; and every job ends for its
// app.
func TestFacesAnswerInTheirOwnWordsWhileTheProviderFails(t *testing.T) {
	t.Parallel()
	e := e2etest.Start(t, dev.StackConfig{
		Sim: sim.Config{TimeScale: e2etest.Scale, Seed: 37,
			Models: map[string]sim.Model{"acme/video": {QueueMedian: e2etest.D(2 * time.Second), QueueSigma: 0.5,
				RunMedian: e2etest.D(20 * time.Second), RunSigma: 0.4, FailRate: 0.1}},
			Faults: sim.Faults{RateLimitRate: 0.05, RetryAfter: e2etest.D(time.Second), ServerErrorRate: 0.25,
				MalformedRate: 0.05, FlapNotFoundRate: 0.05, LostRate: 0.05}},
		Route:      config.Route{Workers: config.Workers{Submit: 8, Status: 16}, Faces: config.FaceKinds},
		NoWebhooks: true, // every status comes from a poll the provider may fail
	})
	// Each app creates its jobs and polls them, as its SDK would, until
	// each has ended for it.
	type answer struct {
		code   int
		status string
	}
	type job struct {
		app *faceApp
		id  string
	}
	apps := faceApps()
	seen := map[string]map[answer]int{} // face → answer → polls
	var open []job
	for i := range apps {
		seen[apps[i].name] = map[answer]int{}
		for n := range 8 {
			open = append(open, job{&apps[i], apps[i].create(t, e.HTTPURL, n)})
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(open) > 0 && time.Now().Before(deadline) {
		next := open[:0]
		for _, j := range open {
			code, status, ended := j.app.poll(t, e.HTTPURL, j.id)
			require.Contains(t, j.app.codes, code, "%s answered HTTP %d about %s: the provider's failures must not reach the app", j.app.name, code, j.id)
			require.Contains(t, j.app.words, status, "%s answered %q about %s: not a status of its own", j.app.name, status, j.id)
			seen[j.app.name][answer{code, status}]++
			if !ended {
				next = append(next, j)
			}
		}
		open = next
		select { // the apps' poll interval
		case <-time.After(50 * time.Millisecond):
		case <-t.Context().Done():
		}
	}
	require.Empty(t, open, "every job ended for its app")

	st := e.Sim.Stats()
	t.Logf("the provider answered Pollux %d 429s, %d 5xx, %d malformed, %d flapping 404s; lost %d jobs",
		st.RateLimited, st.ServerErrors, st.Malformed, st.FlapNotFound, st.Lost)
	require.Positive(t, st.RateLimited, "the provider answered 429s")
	require.Positive(t, st.ServerErrors, "the provider answered 5xx")
	for _, app := range apps {
		t.Logf("%s: what its app saw: %v", app.name, seen[app.name])
	}
}

// A route that keeps its outputs is one whose outputs a face links to
// itself, as the configuration says (app.Env.KeepOutputs reaches the
// front door): the link sends the app on to the provider's copy until
// output custody has one of its own.
func TestAFaceLinksTheOutputsOfARouteThatKeepsThem(t *testing.T) {
	t.Parallel()
	e := e2etest.Start(t, dev.StackConfig{
		Sim: sim.Config{TimeScale: e2etest.Scale,
			Models: map[string]sim.Model{"acme/video": {QueueMedian: e2etest.D(time.Second), RunMedian: e2etest.D(5 * time.Second)}}},
		Route: config.Route{Faces: config.FaceKinds, KeepOutputs: &config.KeepOutputs{AllowPrivate: true}},
	})
	code, p := send(t, http.MethodPost, e.HTTPURL+"/replicate/"+dev.RouteName+"/v1/models/acme/video/predictions", "application/json",
		[]byte(`{"input":{"prompt":"kept"}}`), map[string]string{"Prefer": "wait=30"})
	require.Equal(t, http.StatusCreated, code, "%v", p)
	require.Equal(t, "succeeded", p["status"], "%v", p)
	id := p["id"].(string)
	link := e.HTTPURL + "/replicate/" + dev.RouteName + "/outputs/" + id + "/0"
	require.Equal(t, link, p["output"], "the face's own URL, not the provider's")

	_, rec := send(t, http.MethodGet, e.HTTPURL+"/v1/jobs/"+id, "", nil, nil)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, link, nil)
	require.NoError(t, err)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "no custody runs here: the provider's copy")
	require.Equal(t, rec["outputs"].([]any)[0], resp.Header.Get("Location"))
}
