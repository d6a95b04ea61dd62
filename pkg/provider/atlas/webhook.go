package atlas

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// keysTimeout bounds the key fetch ParseWebhook may need in a process
// whose key cache is cold.
const keysTimeout = 10 * time.Second

// delivery is a webhook body, as the documented and third-party shapes
// spell it: session_id (the prediction id), a top-level status OK or
// ERROR, the prediction under payload (or data), and error.
type delivery struct {
	EventType string          `json:"event_type"`
	SessionID string          `json:"session_id"`
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Payload   json.RawMessage `json:"payload"`
	Data      json.RawMessage `json:"data"`
	Error     json.RawMessage `json:"error"`
}

// readDelivery decodes a webhook body into its prediction id and the
// prediction it carries.
func readDelivery(body []byte) (id string, d delivery, p prediction, err error) {
	if err := json.Unmarshal(body, &d); err != nil {
		return "", d, p, fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	var inner prediction
	for _, raw := range []json.RawMessage{d.Payload, d.Data} {
		if len(raw) > 0 && json.Unmarshal(raw, &inner) == nil && (inner.Status != "" || inner.id() != "" || len(inner.Outputs) > 0) {
			p = inner
			break
		}
		inner = prediction{}
	}
	id = firstNonEmpty(d.SessionID, p.id(), d.ID)
	if !idRe.MatchString(id) {
		return "", d, p, fmt.Errorf("%w: no usable prediction id (session_id, data.id)", provider.ErrMalformed)
	}
	return id, d, p, nil
}

// VerifyWebhook authenticates a delivery and returns its delivery id.
// A delivery that is unsigned or fails verification (a bad or stale
// signature, an unknown key id even after a refresh, keys that cannot be
// fetched) is not refused: it is accepted as a hint, with a delivery id
// of its own content that can never collide with a verified delivery's,
// and ParseWebhook then says nothing of the job but its id, so Pollux
// only checks the job now. Only a body that names no prediction is
// refused, as malformed.
func (a *Adapter) VerifyWebhook(ctx context.Context, h http.Header, body []byte) (string, error) {
	id, d, p, err := readDelivery(body)
	if err != nil {
		return "", err
	}
	if verr := a.verifier.Verify(ctx, h, body); verr != nil {
		a.log.Warn().Err(verr).Str(logkey.RemoteID, id).
			Msg("Atlas Cloud delivery not verified; taken only as a hint to check the job now")
		sum := sha256.New()
		for _, k := range []string{"X-Atlascloud-Webhook-Timestamp", "X-Atlascloud-Webhook-Key-Id",
			"X-Atlascloud-Webhook-Signature-Ed25519", "X-Atlascloud-Webhook-Signature"} {
			_, _ = sum.Write([]byte(strings.Join(h.Values(k), ",") + "\n"))
		}
		_, _ = sum.Write(body)
		return "hint-" + hex.EncodeToString(sum.Sum(nil)[:16]), nil
	}
	// Atlas Cloud sends one delivery per prediction, when it ends: the
	// prediction and what it says identify it (its id header is not
	// signed, so it is not used).
	return "atlas:" + id + ":" + clip(firstNonEmpty(p.Status, d.Status), 64), nil
}

// ParseWebhook decodes a delivery. One the cached keys verify is the
// prediction's status, mapped as a poll's is (the outputs' expiry from the
// route's retention, the delivery naming no submit time); any other is a
// hint: the prediction's id and unknown state, which Pollux answers by
// checking the job now.
func (a *Adapter) ParseWebhook(h http.Header, body []byte) (provider.Status, error) {
	id, d, p, err := readDelivery(body)
	if err != nil {
		return provider.Status{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), keysTimeout)
	defer cancel()
	if !a.verifier.Verified(ctx, h, body) {
		st := provider.Status{RemoteID: id}
		st.State = state.Unknown
		return st, nil
	}
	if p.Status == "" && strings.EqualFold(d.Status, "ERROR") {
		p.Status = "failed" // an ERROR delivery without the prediction's own status
	}
	if errorText(p.Error) == "" {
		p.Error = d.Error // the error may sit beside the payload
	}
	st := observe(id, p, a.retention(ref{}), a.now())
	a.warnUnknown(st)
	return st, nil
}
