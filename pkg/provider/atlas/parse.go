package atlas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
	"github.com/pollux-dev/pollux/pkg/state"
)

// prediction is Atlas Cloud's prediction object, as the documented shapes
// spell it: the current one ({id, status, outputs | output, error,
// error_code, created_at, completed_at}) and the older pages' predictionId.
type prediction struct {
	ID            string          `json:"id"`
	PredictionID  string          `json:"predictionId"`
	PredictionID2 string          `json:"prediction_id"`
	Status        string          `json:"status"`
	Outputs       json.RawMessage `json:"outputs"`
	Output        json.RawMessage `json:"output"`
	Error         json.RawMessage `json:"error"`
	ErrorCode     json.RawMessage `json:"error_code"`
	CreatedAt     json.RawMessage `json:"created_at"`
	CompletedAt   json.RawMessage `json:"completed_at"`
}

// id is the prediction's id, whichever field holds it.
func (p *prediction) id() string {
	for _, s := range []string{p.ID, p.PredictionID, p.PredictionID2} {
		if s != "" {
			return s
		}
	}
	return ""
}

// envelope is Atlas Cloud's answer: {code, msg, data}, data holding the
// prediction; older pages show the prediction's fields at the top level.
type envelope struct {
	Code    json.RawMessage `json:"code"`
	Msg     string          `json:"msg"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// unwrap decodes an answer into its prediction. found is false when the
// answer holds none; then err tells why when the envelope says (a code of
// an HTTP error inside a 200).
func unwrap(b []byte, now time.Time) (p prediction, found bool, err error) {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return p, false, &provider.Error{Class: provider.Transient, Message: "malformed Atlas Cloud answer", Err: err}
	}
	if d := bytes.TrimSpace(env.Data); len(d) > 0 && d[0] == '{' {
		if json.Unmarshal(d, &p) == nil && (p.id() != "" || p.Status != "") {
			return p, true, nil
		}
	}
	// The older shape: the prediction's fields at the top level.
	if json.Unmarshal(b, &p) == nil && (p.id() != "" || p.Status != "") {
		return p, true, nil
	}
	if code, ok := intCode(env.Code); ok && code >= 400 && code <= 599 {
		e := httpapi.Classify(code, http.Header{}, nil, now)
		e.Message = clip(firstNonEmpty(env.Msg, env.Message, fmt.Sprintf("Atlas Cloud answered code %d", code)), 1024)
		return p, false, e
	}
	return p, false, nil
}

// parseSubmit decodes a submit answer: the id at data.id (the current
// docs, the official MCP server), else data.predictionId or a top-level
// id (older doc pages).
func parseSubmit(b []byte, now time.Time) (provider.Status, error) {
	p, found, err := unwrap(b, now)
	if err != nil {
		var pe *provider.Error
		if errors.As(err, &pe) && pe.Class == provider.NotFound {
			pe.Class = provider.Invalid // an unknown model
		}
		return provider.Status{}, err
	}
	id := p.id()
	if !found || !idRe.MatchString(id) {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "Atlas Cloud submit answer without a usable prediction id"}
	}
	st := provider.Status{RemoteID: id}
	st.State, st.Raw = state.Queued, clip(p.Status, 64)
	st.CreatedAt = readTime(p.CreatedAt)
	return st, nil
}

// parsePrediction decodes a status answer; keep is how long the job's
// outputs are kept after completion.
func parsePrediction(id string, b []byte, keep time.Duration, now time.Time) (provider.Status, error) {
	p, found, err := unwrap(b, now)
	if err != nil {
		return provider.Status{}, err
	}
	if !found {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "Atlas Cloud answer holds no prediction"}
	}
	return observe(id, p, keep, now), nil
}

// observe maps a prediction to a status. The status decides, except that
// an error code with no outputs is a failure when the status is missing,
// unknown or says success (Atlas Cloud reports failures inside HTTP 200
// answers, "always check data.status"), and a succeeded prediction whose
// outputs are past their retention is expired.
func observe(id string, p prediction, keep time.Duration, now time.Time) provider.Status {
	st := provider.Status{RemoteID: id}
	st.Raw = clip(p.Status, 64)
	st.CreatedAt = readTime(p.CreatedAt)
	outputs := provider.AppendOutputURLs(nil, p.Outputs)
	if len(outputs) == 0 {
		outputs = provider.AppendOutputURLs(nil, p.Output)
	}
	code := errorCode(p.ErrorCode)
	msg := errorText(p.Error)
	switch strings.ToLower(strings.TrimSpace(p.Status)) {
	case "starting":
		st.State = state.Queued
	case "processing":
		st.State = state.Running
	case "completed", "succeeded":
		st.State = state.Succeeded
	case "failed":
		st.State = state.Failed
	case "timeout":
		st.State = state.Failed
		msg = firstNonEmpty(msg, "the prediction timed out at Atlas Cloud")
	case "cancelled", "canceled":
		st.State = state.Canceled
	default:
		st.State = state.Unknown
	}
	if code != "" && len(outputs) == 0 && (st.State == state.Succeeded || st.State == state.Unknown) {
		st.State = state.Failed
	}
	if st.State.Terminal() {
		st.CompletedAt = readTime(p.CompletedAt)
	}
	switch st.State {
	case state.Succeeded:
		st.Outputs = outputs
		from := firstTime(st.CompletedAt, st.CreatedAt, now.UTC())
		st.OutputsExpireAt = from.Add(keep)
		if !st.CompletedAt.IsZero() && !now.Before(st.CompletedAt.Add(keep)) {
			st.State = state.Expired
			st.Reason = fmt.Sprintf("Atlas Cloud's outputs expired at %s (kept %s after completion)",
				st.OutputsExpireAt.Format(time.RFC3339), keep)
			st.Outputs = nil
		}
	case state.Failed:
		st.Reason = reason(msg, code)
	case state.Canceled:
		st.Reason = firstNonEmpty(msg, "canceled at Atlas Cloud")
	}
	return st
}

// reason is a failure's explanation with Atlas Cloud's code.
func reason(msg, code string) string {
	switch {
	case msg != "" && code != "":
		return msg + " (code " + code + ")"
	case msg != "":
		return msg
	case code != "":
		return "Atlas Cloud error code " + code
	}
	return "failed at Atlas Cloud without an error message"
}

// errorCode reads error_code, a number or a string; "" for none (absent,
// null, empty or 0).
func errorCode(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		s = strings.TrimSpace(s)
	} else {
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return ""
		}
		s = n.String()
	}
	if s == "" || s == "0" {
		return ""
	}
	return clip(s, 32)
}

// errorText reads error: a string, or an object with a message; "" for
// none.
func errorText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clip(strings.TrimSpace(s), 1024)
	}
	var o struct {
		Message string `json:"message"`
		Msg     string `json:"msg"`
		Detail  string `json:"detail"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return clip(strings.TrimSpace(firstNonEmpty(o.Message, o.Msg, o.Detail)), 1024)
	}
	return ""
}

// envelopeMessage reads an error answer's msg, else what httpapi.Detail
// finds.
func envelopeMessage(b []byte) string {
	var env envelope
	if json.Unmarshal(b, &env) == nil && strings.TrimSpace(env.Msg) != "" {
		return clip(strings.TrimSpace(env.Msg), 1024)
	}
	return httpapi.Detail(b)
}

// intCode reads the envelope's code as an integer.
func intCode(raw json.RawMessage) (int, bool) {
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false
		}
		n = json.Number(s)
	}
	v, err := strconv.Atoi(n.String())
	return v, err == nil
}

// readTime reads a time written as RFC 3339 or as Unix seconds or
// milliseconds (a number or a numeric string); zero when absent,
// unreadable or implausible.
func readTime(raw json.RawMessage) time.Time {
	var t time.Time
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return time.Time{}
		}
		s = n.String()
	}
	if parsed, err := time.Parse(time.RFC3339Nano, s); err == nil {
		t = parsed
	} else if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && f > 0 && f < 1e15 {
		if f >= 1e11 { // milliseconds
			t = time.UnixMilli(int64(f))
		} else {
			t = time.Unix(int64(f), 0)
		}
	}
	if t.Year() < 2000 || t.Year() > 2200 {
		return time.Time{}
	}
	return t.UTC()
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstTime(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}
