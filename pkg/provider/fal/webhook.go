package fal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// delivery is the body of a fal webhook.
type delivery struct {
	RequestID    string          `json:"request_id"`
	Status       string          `json:"status"`
	Payload      json.RawMessage `json:"payload"`
	Error        json.RawMessage `json:"error"`
	PayloadError json.RawMessage `json:"payload_error"`
}

var statusRe = regexp.MustCompile(`^[A-Z_]{1,32}$`)

// VerifyWebhook checks a delivery's ed25519 signature against fal's keys
// and returns request_id + ":" + status, fal's delivery being otherwise
// unnamed. Errors wrap provider.ErrSignature (not authentic, stale, or for
// another user id) or provider.ErrMalformed; a failure to get fal's keys
// wraps neither, so the receiver asks fal to retry.
func (a *Adapter) VerifyWebhook(ctx context.Context, h http.Header, body []byte) (string, error) {
	if a.verifier == nil {
		return "", errors.New("fal webhooks are not configured for this route (options.user_id)")
	}
	rid, err := a.verifier.Verify(ctx, h, body)
	switch {
	case err == nil:
	case errors.Is(err, signature.ErrKeys):
		return "", err
	default:
		return "", provider.VerifyError(err)
	}
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		return "", fmt.Errorf("%w: body: %w", provider.ErrMalformed, err)
	}
	if d.RequestID != rid || !statusRe.MatchString(d.Status) {
		return "", fmt.Errorf("%w: body's request_id or status does not fit the signed delivery", provider.ErrMalformed)
	}
	return rid + ":" + d.Status, nil
}

// ParseWebhook decodes a verified delivery.
func (a *Adapter) ParseWebhook(_ http.Header, body []byte) (provider.Status, error) {
	st, err := parseDelivery(body)
	if err != nil {
		return provider.Status{}, fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	return st, nil
}

func parseDelivery(body []byte) (provider.Status, error) {
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		return provider.Status{}, err
	}
	if checkID(d.RequestID) != nil {
		return provider.Status{}, errors.New("delivery without a valid request_id")
	}
	st := provider.Status{RemoteID: d.RequestID}
	st.Raw = clip(d.Status, 64)
	switch d.Status {
	case "OK":
		if text(d.PayloadError) != "" {
			// The result exists but is not attached: a poll fetches it.
			st.State = state.Unknown
			return st, nil
		}
		st.State = state.Succeeded
		st.Outputs = provider.AppendOutputURLs(nil, d.Payload)
	case "ERROR":
		st.State = state.Failed
		st.Reason = text(d.Error)
		if dt := detail(d.Payload); dt != "" {
			if st.Reason != "" {
				st.Reason += ": "
			}
			st.Reason += dt
		}
		if st.Reason == "" {
			st.Reason = "failed at fal without an error message"
		}
	default:
		st.State = state.Unknown
	}
	return st, nil
}
