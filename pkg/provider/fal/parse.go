package fal

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
	"github.com/pollux-dev/pollux/pkg/state"
)

// queueStatus is fal's status response, and the status part of a submit
// response.
type queueStatus struct {
	RequestID     string          `json:"request_id"`
	Status        string          `json:"status"`
	QueuePosition *int            `json:"queue_position"`
	Error         json.RawMessage `json:"error"`
	ErrorType     string          `json:"error_type"`
}

// next is what Status still has to do after reading a status response.
type next int

const (
	done         next = iota // the status is the answer
	fetchResult              // COMPLETED without an error: confirm from the result
	checkTimeout             // COMPLETED with request_timeout: was it the start deadline?
)

// parseSubmit decodes a submit response.
func parseSubmit(b []byte) (provider.Status, queueURLs, error) {
	var r struct {
		queueStatus
		queueURLs
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return provider.Status{}, queueURLs{}, &provider.Error{Class: provider.Transient, Message: "malformed fal submit response", Err: err}
	}
	if err := checkID(r.RequestID); err != nil {
		return provider.Status{}, queueURLs{}, &provider.Error{Class: provider.Transient, Message: "fal submit response without a valid request_id"}
	}
	st := provider.Status{RemoteID: r.RequestID}
	st.State, st.Raw = state.Queued, r.Status
	st.QueuePosition = position(r.QueuePosition)
	return st, r.queueURLs, nil
}

// parseStatus decodes a status response into a normalized status and says
// what is left to do.
func parseStatus(id string, b []byte) (provider.Status, next, error) {
	var q queueStatus
	if err := json.Unmarshal(b, &q); err != nil {
		return provider.Status{}, done, &provider.Error{Class: provider.Transient, Message: "malformed fal status", Err: err}
	}
	st := provider.Status{RemoteID: id}
	st.Raw = q.Status
	errText := text(q.Error)
	switch q.Status {
	case "IN_QUEUE":
		st.State = state.Queued
		st.QueuePosition = position(q.QueuePosition)
	case "IN_PROGRESS":
		st.State = state.Running
	case "COMPLETED":
		if errText == "" && q.ErrorType == "" {
			return st, fetchResult, nil
		}
		st.State = state.Failed
		st.Reason = reason(errText, q.ErrorType)
		if q.ErrorType == "request_timeout" {
			return st, checkTimeout, nil
		}
	case "FAILED": // third-party schema only [unconfirmed]
		st.State = state.Failed
		st.Reason = reason(errText, q.ErrorType)
	case "CANCELED", "CANCELLED": // third-party schema only [unconfirmed]
		st.State = state.Canceled
		st.Reason = "canceled at fal"
	default:
		st.State = state.Unknown
	}
	return st, done, nil
}

// position turns fal's 0-indexed count of requests ahead into Pollux's
// 1-based queue position (1 is next to start).
func position(p *int) *int {
	if p == nil || *p < 0 || *p > 1<<30 {
		return nil
	}
	n := *p + 1
	return &n
}

func reason(errText, errType string) string {
	switch {
	case errText != "" && errType != "":
		return errText + " (" + errType + ")"
	case errText != "":
		return errText
	case errType != "":
		return "fal error " + errType
	}
	return "failed at fal without an error message"
}

// cancelAnswer reads the status of a cancel response body, "" when there
// is none.
func cancelAnswer(b []byte) string {
	var r struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(b, &r) != nil {
		return ""
	}
	return clip(r.Status, 64)
}

// detail extracts fal's explanation from an error body: "detail" as a
// string (request errors) or as a list of {msg} (model validation errors),
// else what httpapi.Detail finds.
func detail(b []byte) string {
	var r struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(b, &r) == nil && len(r.Detail) > 0 {
		if d := detailText(r.Detail); d != "" {
			return d
		}
	}
	return httpapi.Detail(b)
}

func detailText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clip(s, 1024)
	}
	var list []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return ""
	}
	msgs := make([]string, 0, min(len(list), 5))
	for _, e := range list[:min(len(list), 5)] {
		m := e.Msg
		if len(e.Loc) > 0 {
			loc := make([]string, len(e.Loc))
			for i, l := range e.Loc {
				loc[i] = fmt.Sprint(l)
			}
			m = strings.Join(loc, ".") + ": " + m
		}
		msgs = append(msgs, m)
	}
	return clip(strings.Join(msgs, "; "), 1024)
}

// text renders an error value: a string as is, anything else as its JSON.
func text(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clip(s, 1024)
	}
	return clip(string(raw), 1024)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
