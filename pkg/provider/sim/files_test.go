package sim_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// With OutputBytes, a succeeded prediction's output is a file the sim
// serves itself, the same bytes every time, with its length; a model may
// have files of its own size; a deleted output is answered 404, as is
// the file of a prediction not succeeded yet.
func TestOutputFiles(t *testing.T) {
	t.Parallel()
	e := setup(t, sim.Config{Default: exact(time.Millisecond, time.Millisecond), OutputBytes: 100_000,
		Models: map[string]sim.Model{"big/model": {QueueMedian: dur(time.Millisecond), RunMedian: dur(time.Millisecond), OutputBytes: 7}}})
	p := e.create(simpleBody)
	br, bb := e.do(http.MethodPost, "/v1/models/big/model/predictions", `{"input":{"prompt":"a cat"}}`)
	require.Equal(t, http.StatusCreated, br.StatusCode, "body: %s", bb)
	big := decode[wirePred](t, bb)
	require.Eventually(t, func() bool {
		return e.mustGet(p.ID).Status == sim.StatusSucceeded && e.mustGet(big.ID).Status == sim.StatusSucceeded
	}, 5*time.Second, 5*time.Millisecond)
	out := e.mustGet(p.ID).Output
	require.Equal(t, []string{e.url + "/files/" + p.ID + "/output.mp4"}, out)
	r, body := e.do(http.MethodGet, strings.TrimPrefix(out[0], e.url), "")
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Equal(t, "video/mp4", r.Header.Get("Content-Type"))
	require.Equal(t, "100000", r.Header.Get("Content-Length"))
	require.True(t, bytes.Equal(sim.OutputFile(p.ID, 100_000), body), "the same bytes every time")
	require.False(t, bytes.Equal(sim.OutputFile(big.ID, 100_000), body), "each prediction's bytes are its own")

	r, body = e.do(http.MethodGet, "/files/"+big.ID+"/output.mp4", "")
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Equal(t, 7, len(body), "the model's own size")

	require.True(t, e.sim.DeleteOutput(p.ID))
	r, _ = e.do(http.MethodGet, "/files/"+p.ID+"/output.mp4", "")
	require.Equal(t, http.StatusNotFound, r.StatusCode)
	r, _ = e.do(http.MethodGet, "/files/nope/output.mp4", "")
	require.Equal(t, http.StatusNotFound, r.StatusCode)
}

// OutputGoneRate deletes outputs at random: at 1, every one.
func TestOutputGoneRate(t *testing.T) {
	t.Parallel()
	e := setup(t, sim.Config{Default: exact(time.Millisecond, time.Millisecond), OutputBytes: 10,
		Faults: sim.Faults{OutputGoneRate: 1}})
	p := e.create(simpleBody)
	require.Eventually(t, func() bool { return e.mustGet(p.ID).Status == sim.StatusSucceeded }, 5*time.Second, 5*time.Millisecond)
	r, _ := e.do(http.MethodGet, "/files/"+p.ID+"/output.mp4", "")
	require.Equal(t, http.StatusNotFound, r.StatusCode)
	_, err := sim.New(sim.Config{OutputBytes: -1})
	require.ErrorContains(t, err, "output_bytes")
}
