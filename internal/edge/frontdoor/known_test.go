package frontdoor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Through a NATS outage a face's poll of a job the front door read
// before is answered at once — not after the request timeout, nor after
// a wait for the connection — from the last record read, freshened by
// the jobs index but never as ended from it; a job last read ended is
// answered as it ended.
func TestAFacePollThroughAnOutageIsAnsweredFromTheLastRecordRead(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, frontdoor.Config{RequestTimeout: 10 * time.Minute, ConnectWait: 10 * time.Minute,
		Faces: []face.Mount{{Kind: face.Replicate, Route: route}}}, false, withIndex)
	md := map[string]string{face.MetaFace: string(face.Replicate), "replicate_model": "acme/video"}
	job := func(id string, s state.State) *state.Job {
		return o.storeJob(t, &state.Job{ID: id, Route: route, Model: "m", State: s, RemoteID: "r-" + id, Metadata: md,
			CreatedAt: time.Now().UTC(), EventSeq: 1})
	}
	started, ended, done := job("startedsince0000000000000a", state.Queued), job("endedsince00000000000000a", state.Running), job("endedbefore0000000000000a", state.Succeeded)
	get := func(id string) (int, map[string]any, http.Header) { return o.poll(t, id) }
	for id, want := range map[string]string{started.ID: "starting", ended.ID: "processing", done.ID: "succeeded"} {
		_, p, _ := get(id)
		require.Equal(t, want, p["status"], id)
	}
	// Since the reads: one job started, another ended; the index knows.
	o.publish(t, started, "running", 2, state.Running)
	o.publish(t, ended, "succeeded", 2, state.Succeeded)
	require.Eventually(t, func() bool {
		s, _ := o.index.Get(started.ID)
		e, _ := o.index.Get(ended.ID)
		return s.State == state.Running && e.State == state.Succeeded
	}, 10*time.Second, 10*time.Millisecond)

	o.down(t)
	for id, want := range map[string]string{started.ID: "processing", ended.ID: "processing", done.ID: "succeeded"} {
		code, p, _ := get(id)
		require.Equal(t, http.StatusOK, code, "%s: %v", id, p)
		require.Equal(t, want, p["status"], "%s: what may be stale never says it ended", id)
	}
	o.up(t)
}

// Any other verb of a face — a cancel — made while the connection is
// down waits for it to come back (ConnectWait) rather than fail: a
// restart of a few seconds only makes it slower.
func TestAFaceCancelWaitsForNATSToComeBack(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, frontdoor.Config{ConnectWait: time.Minute, Faces: []face.Mount{{Kind: face.Replicate, Route: route}}}, false, nil)
	id := "cancelwhiledown000000000a"
	o.storeJob(t, &state.Job{ID: id, Route: route, Model: "m", State: state.Pending, IntakeSeq: 3,
		Metadata: map[string]string{face.MetaFace: string(face.Replicate)}, CreatedAt: time.Now().UTC()})
	code, p, _ := o.poll(t, id)
	require.Equal(t, http.StatusOK, code, "%v", p)
	o.down(t)
	type answer struct {
		code int
		body map[string]any
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		var a answer
		defer func() { answered <- a }()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, o.url+"/replicate/"+route+"/v1/predictions/"+id+"/cancel", nil)
		if err != nil {
			a.err = err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			a.err = err
			return
		}
		defer func() { _ = resp.Body.Close() }()
		a.code, a.err = resp.StatusCode, json.NewDecoder(resp.Body).Decode(&a.body)
	}()
	o.up(t)
	a := <-answered
	require.NoError(t, a.err)
	require.Equal(t, http.StatusOK, a.code, "%v", a.body)
	require.Equal(t, "canceled", a.body["status"], "%v", a.body)
}

// At most Config.LastKnown records are remembered, the least recently
// read forgotten first, each of at most 8 KiB: a larger one is not. A
// poll of a job not remembered is, through an outage, a 503 with
// Retry-After.
func TestTheLastRecordsReadAreBounded(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, frontdoor.Config{LastKnown: 2, ConnectWait: 100 * time.Millisecond, Faces: []face.Mount{{Kind: face.Replicate, Route: route}}}, false, nil)
	md := map[string]string{face.MetaFace: string(face.Replicate)}
	large := map[string]string{face.MetaFace: string(face.Replicate)}
	for i := range 9 {
		large[fmt.Sprintf("k%d", i)] = strings.Repeat("v", 1000)
	}
	ids := []string{"bounded000000000000000001", "bounded000000000000000002", "bounded000000000000000003", "bounded00000000000000large"}
	for _, id := range ids {
		j := &state.Job{ID: id, Route: route, Model: "m", State: state.Running, Metadata: md, CreatedAt: time.Now().UTC()}
		if strings.HasSuffix(id, "large") {
			j.Metadata = large
		}
		o.storeJob(t, j)
		code, p, _ := o.poll(t, id)
		require.Equal(t, http.StatusOK, code, "%v", p)
	}
	for _, id := range ids[1:3] { // read again: the latest two
		code, p, _ := o.poll(t, id)
		require.Equal(t, http.StatusOK, code, "%v", p)
	}
	o.down(t)
	for id, want := range map[string]int{ids[0]: http.StatusServiceUnavailable, ids[1]: http.StatusOK, ids[2]: http.StatusOK, ids[3]: http.StatusServiceUnavailable} {
		code, p, h := o.poll(t, id)
		require.Equal(t, want, code, "%s: %v", id, p)
		if code == http.StatusServiceUnavailable {
			require.NotEmpty(t, h.Get("Retry-After"), id)
		}
	}
	o.up(t)
}

// poll gets prediction id from the Replicate face, with a client that
// waits far less than the request timeout.
func (o *outage) poll(t *testing.T, id string) (int, map[string]any, http.Header) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, o.url+"/replicate/"+route+"/v1/predictions/"+id, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err, "answered well before the request timeout")
	defer func() { _ = resp.Body.Close() }()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body, resp.Header
}
