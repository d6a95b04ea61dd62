package faces_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// fetchingSim is simConfig with the simulated provider taking the input
// files as a provider does: fetching each URL, recording its SHA-256.
// Its jobs never fail: each must deliver its image.
const fetchingSim = `
time_scale: 50
seed: 7
latency: 5ms
fetch_inputs: true
default: {queue_median: 2s, queue_sigma: 0.4, run_median: 20s, run_sigma: 0.3}
models:
  openai/sora-content: {queue_median: 2s, run_median: 20s, output_bytes: 4096}
`

// simInputs is what the simulated provider received of the input files.
func (s *stack) simInputs(t *testing.T) sim.InputStats {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+s.Sim+"/_sim/inputs", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var in sim.InputStats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&in))
	return in
}

// requireReceived checks the provider received the image an SDK sent
// (its line's sha256 and size) for the line's job, once: the job's
// prediction has that one file, fetched by URL.
func (s *stack) requireReceived(t *testing.T, line map[string]any, field string) {
	t.Helper()
	id, _ := line["id"].(string)
	require.NotEmpty(t, id, "%v", line)
	j := s.record(t, id)
	require.NotEmpty(t, j.RemoteID, "the job reached the provider: %v", line)
	var files []sim.InputFile
	for _, f := range s.simInputs(t).Files {
		if f.Prediction == j.RemoteID {
			files = append(files, f)
		}
	}
	require.Len(t, files, 1, "one file for job %s: %v", id, files)
	require.Equal(t, field, files[0].Field)
	require.Equal(t, "url", files[0].Via, "fetched from the front door's signed URL")
	require.Equal(t, line["sha256"], files[0].SHA256, "the provider got exactly the bytes the app sent")
	require.EqualValues(t, line["size"], files[0].Size)
}

// Image-to-video through each SDK's default upload path, a 5 MB image:
// Replicate's files.create (urls.get in the input), fal's storage upload
// (initiate through the proxy, a plain PUT to the upload_url, the
// file_url in the input), OpenAI's multipart input_reference. The
// simulated provider fetches each file from the front door's signed URL:
// the bytes it got are the app's, once per job.
func TestImageInputsThroughTheSDKs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := startWith(t, fetchingSim, "", nil)

	rep := byField("step", node(t, "replicate.mjs", 90*time.Second, s.replicateEnv("image")...))["image"]
	require.NotNil(t, rep)
	require.Equal(t, "succeeded", rep["status"], "%v", rep)
	require.EqualValues(t, 1, rep["files"], "files.list shows the upload: %v", rep)
	require.Contains(t, rep["input_image"], s.URL+"/replicate/sim/v1/files/", "the create's answer shows the input as sent")
	s.requireReceived(t, rep, "image")

	fal := byField("op", node(t, "fal.mjs", 90*time.Second, falEnv(s, "image")...))["image"]
	require.NotNil(t, fal)
	require.Nil(t, fal["error"], "%v", fal)
	s.requireReceived(t, fal, "image_url")

	oai := byField("step", node(t, "openai.mjs", 90*time.Second, "POLLUX_URL="+s.URL, "TOKEN="+tokenApp, "MODE=image"))["image"]
	require.NotNil(t, oai)
	require.Equal(t, "completed", oai["status"], "%v", oai)
	s.requireReceived(t, oai, "input_reference")

	require.Equal(t, 3, s.simInputs(t).Fetches, "one fetch a job")
}

// The gateway SIGKILLed under an image job: the app uploads its image
// (files.create), then its create — carrying an Idempotency-Key — kills
// the gateway once durable and before it answers (exit 137); the app
// retries the create with its key until the restarted gateway answers.
// One job, and the provider fetched the image once a create it received
// (a create on its way at the kill is sent again, with its key), the
// app's bytes.
func TestAnImageJobThroughAGatewayKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := startWith(t, fetchingSim, "", nil)
	s.Ingest.Kill(t)
	crashing := s.startCrashingIngest(t)
	wait := startNode(t, "replicate.mjs", 120*time.Second, s.replicateEnv("image", "KEY=image-42")...)
	select {
	case <-crashing.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the gateway did not crash after the create's submission")
	}
	s.StartIngest(t)
	line := byField("step", wait())["image"]
	require.NotNil(t, line)
	require.Equal(t, "succeeded", line["status"], "%v", line)
	require.GreaterOrEqual(t, line["attempts"], float64(3), "the create was retried (an upload, a create, its retries): %v", line)
	s.requireReceived(t, line, "image")
	st := s.SimStats(t)
	require.Equal(t, 1, st.Predictions, "one job at the provider")
	// The image is fetched once a create the provider receives: once,
	// unless the kill came while the create was on its way, and the
	// restarted fleet sent it again with its key (the provider then
	// fetches before it finds the key's prediction).
	require.Equal(t, 1+st.DuplicateCreates, s.simInputs(t).Fetches, "the image fetched once a create received")
	require.LessOrEqual(t, st.DuplicateCreates, 1, "a create sent again at most once, with its key")
}

// fal's status streaming through the face: subscribe in streaming mode
// and queue.streamStatus read the status as an event stream, served from
// Pollux's own records, to COMPLETED; subscribe then gets the result.
func TestFalStatusStreaming(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := startWith(t, fetchingSim, "", nil)
	before := s.SimStats(t).StatusCalls
	lines := byField("op", node(t, "fal.mjs", 90*time.Second, falEnv(s, "stream")...))
	sub := lines["stream-subscribe"]
	require.NotNil(t, sub)
	require.Nil(t, sub["error"], "%v", sub)
	require.Equal(t, sub["requestId"], sub["resultRequestId"])
	statuses, _ := sub["statuses"].([]any)
	require.NotEmpty(t, statuses)
	require.Equal(t, "COMPLETED", statuses[len(statuses)-1], "%v", sub)
	st := lines["streamStatus"]
	require.NotNil(t, st)
	require.Equal(t, "COMPLETED", st["last"], "%v", st)
	// Each job's polls are Pollux's own schedule's: the streams cost the
	// provider nothing.
	t.Logf("provider status calls for 2 jobs: %d", s.SimStats(t).StatusCalls-before)
}

// Many apps at once, each job with an image of its own (the issue's
// load: 50 clients, 200 jobs, 256 KiB images, at the simulated provider's
// fast timings): every job ends, the provider made one prediction a job,
// fetched each job's image once, the bytes its app sent, and saw only
// Pollux's own status calls, as with Pollux alone.
func TestImageJobsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	const jobs = 200
	s := startWith(t, fetchingSim, "", nil)
	lines := node(t, "replicate.mjs", 180*time.Second, s.replicateEnv("images", "CLIENTS=50", fmt.Sprintf("JOBS=%d", jobs), "IMAGE_BYTES=262144")...)
	require.Len(t, lines, jobs)
	fetched := map[string]sim.InputFile{}
	for _, f := range s.simInputs(t).Files {
		_, twice := fetched[f.Prediction]
		require.False(t, twice, "one file fetched for prediction %s", f.Prediction)
		fetched[f.Prediction] = f
	}
	ids := make([]string, 0, jobs)
	for _, l := range lines {
		require.Equal(t, "succeeded", l["status"], "%v", l)
		id, _ := l["id"].(string)
		j := s.record(t, id)
		f, ok := fetched[j.RemoteID]
		require.True(t, ok, "job %s's image reached the provider", id)
		require.Equal(t, "image", f.Field)
		require.Equal(t, "url", f.Via, "fetched from the front door's signed URL")
		require.Equal(t, l["sha256"], f.SHA256, "the provider got exactly the bytes the app sent")
		ids = append(ids, id)
	}
	st := s.SimStats(t)
	require.Zero(t, st.DuplicateCreates, "no create sent twice")
	// Each prediction received one file (above), one a job; a create
	// the provider fetched for and then never answered (its caller timed
	// out on a loaded machine, and sent it again) counts a fetch more.
	require.GreaterOrEqual(t, s.simInputs(t).Fetches, jobs, "each image fetched")
	requireProviderPollsArePolluxs(t, s, "replicate (images)", ids, -1)
}
