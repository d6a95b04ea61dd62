package fal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Status streaming: GET …/requests/{id}/status/stream, what the client's
// queue.streamStatus and subscribe({mode: "streaming"}) read. The face
// answers a text/event-stream of fal's status objects from the job's
// record — one at once, then one each time what it says changes, as
// Pollux's jobs index tells the face (face.Kit.Await: no provider call)
// — and ends it after COMPLETED, as fal does. A stream runs at most
// MaxStream; an idle one sends a comment every streamKeepAlive.

// MaxStream bounds one status stream; the client's subscribe then reads
// the status again (a stream that ends before COMPLETED resolves with
// the last status, which subscribe follows with a poll).
const MaxStream = 30 * time.Minute

// streamKeepAlive is how often an idle stream sends a comment line.
const streamKeepAlive = 10 * time.Second

// statusStream serves a request's status as an event stream.
func (f *Face) statusStream(w http.ResponseWriter, r *http.Request, t target) error {
	j, err := f.job(r, t, f.Poll)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	end := time.Now().Add(MaxStream)
	var last []byte
	for {
		s, _ := statusOf(j, t.app, t.logs)
		b, err := json.Marshal(s)
		if err != nil {
			return nil // a status always encodes; the stream has begun
		}
		if !bytes.Equal(b, last) {
			last = b
			_ = rc.SetWriteDeadline(time.Now().Add(streamKeepAlive + 5*time.Second))
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil || rc.Flush() != nil {
				return nil // the client is gone
			}
		}
		if j.State.Terminal() || !time.Now().Before(end) || r.Context().Err() != nil {
			return nil
		}
		next := f.Await(r, j.ID, time.Now().Add(streamKeepAlive), func(n *state.Job) bool {
			ns, _ := statusOf(n, t.app, t.logs)
			nb, _ := json.Marshal(ns)
			return !bytes.Equal(nb, last)
		})
		if next == nil {
			_ = rc.SetWriteDeadline(time.Now().Add(streamKeepAlive + 5*time.Second))
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return nil
			}
			continue
		}
		j = next
	}
}
