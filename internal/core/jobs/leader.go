package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Reads of a KV bucket are served by any of its replicas. A replica that
// has not caught up answers "not found" for a job created moments ago — a
// restarted server serves reads once it is 90% caught up, and any follower
// may be a write behind the quorum — and Pollux acts on "not found" by
// dropping a job's check or a webhook delivery, which would leave the job
// unfollowed for good. The leader has every acknowledged write, so a
// replica's "not found" is asked again of it: one request, only when a
// replica said "not found"; on a single server the answer is the same.

// leaderGet reads the job's latest record from the bucket's stream leader
// (the stream API's message get, which only the leader answers, rather
// than a direct get, which any replica may); found is false when the
// leader has no live value either.
func (s *records) leaderGet(ctx context.Context, id string) (j *state.Job, rev uint64, found bool, err error) {
	bucket := s.kv.Bucket()
	m, found, err := leaderMsg(ctx, s.js, "KV_"+bucket, msgGet{LastBySubject: "$KV." + bucket + "." + id})
	switch {
	case err != nil:
		return nil, 0, false, fmt.Errorf("confirm job %s with the bucket's leader: %w", id, err)
	case !found || deleted(m.Header):
		return nil, 0, false, nil
	}
	j, err = state.Decode(m.Data)
	if err != nil {
		return nil, 0, false, fmt.Errorf("get job %s (revision %d): %w", id, m.Seq, err)
	}
	return j, m.Seq, true, nil
}

// msgGet is a request of the stream API's message get: a message by its
// sequence, or the latest on a subject (wildcards allowed).
type msgGet struct {
	Seq           uint64 `json:"seq,omitempty"`
	LastBySubject string `json:"last_by_subj,omitempty"`
}

// storedMsg is a message as the stream API's message get returns it.
type storedMsg struct {
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Header  []byte    `json:"hdrs"`
	Data    []byte    `json:"data"`
	Time    time.Time `json:"time"`
}

// leaderMsg reads a message from the leader of stream: the stream API's
// message get, which only the leader answers. The client's own gets are
// direct gets wherever a stream allows them, which any replica answers,
// possibly a few writes behind. found is false when there is no such
// message.
func leaderMsg(ctx context.Context, js jetstream.JetStream, stream string, get msgGet) (storedMsg, bool, error) {
	req, err := json.Marshal(get)
	if err != nil {
		return storedMsg{}, false, err
	}
	if _, ok := ctx.Deadline(); !ok {
		// As the client's own API calls: an unanswered request (no
		// permission, no leader) must not wait forever.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(js.Options().DefaultTimeout, 5*time.Second))
		defer cancel()
	}
	msg, err := js.Conn().RequestWithContext(ctx, apiPrefix(js)+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return storedMsg{}, false, err
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *storedMsg `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return storedMsg{}, false, fmt.Errorf("unreadable answer from stream %s: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == events.CodeNoMessage:
		return storedMsg{}, false, nil
	case resp.Error != nil:
		return storedMsg{}, false, fmt.Errorf("stream %s: %s (%d)", stream, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return storedMsg{}, false, fmt.Errorf("stream %s: an answer without a message", stream)
	}
	return *resp.Message, true, nil
}

// apiPrefix is the JetStream API prefix js sends its requests under.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}

// deleted reports whether a KV message's headers (NATS/1.0 wire form:
// a version line, then "Name: value" lines) mark it as a delete or purge.
func deleted(hdr []byte) bool {
	for _, line := range strings.Split(string(hdr), "\r\n")[1:] {
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "KV-Operation") {
			op := strings.TrimSpace(value)
			return op == "DEL" || op == "PURGE"
		}
	}
	return false
}
