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
	req, err := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + id})
	if err != nil {
		return nil, 0, false, err
	}
	subject := apiPrefix(s.js) + "STREAM.MSG.GET.KV_" + bucket
	if _, ok := ctx.Deadline(); !ok {
		// As the client's own API calls: an unanswered request (no
		// permission, no leader) must not wait forever.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(s.js.Options().DefaultTimeout, 5*time.Second))
		defer cancel()
	}
	msg, err := s.js.Conn().RequestWithContext(ctx, subject, req)
	if err != nil {
		return nil, 0, false, fmt.Errorf("confirm job %s with the bucket's leader: %w", id, err)
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Seq    uint64 `json:"seq"`
			Header []byte `json:"hdrs"`
			Data   []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, 0, false, fmt.Errorf("confirm job %s with the bucket's leader: unreadable answer: %w", id, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == events.CodeNoMessage:
		return nil, 0, false, nil
	case resp.Error != nil:
		return nil, 0, false, fmt.Errorf("confirm job %s with the bucket's leader: %s (%d)", id, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return nil, 0, false, fmt.Errorf("confirm job %s with the bucket's leader: an answer without a message", id)
	case deleted(resp.Message.Header):
		return nil, 0, false, nil
	}
	j, err = state.Decode(resp.Message.Data)
	if err != nil {
		return nil, 0, false, fmt.Errorf("get job %s (revision %d): %w", id, resp.Message.Seq, err)
	}
	return j, resp.Message.Seq, true, nil
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
