package veo

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// operation is the part of a google.longrunning.Operation Pollux reads, as
// the Gemini API returns it for predictLongRunning.
type operation struct {
	Name     string     `json:"name"`
	Done     bool       `json:"done"`
	Error    *rpcStatus `json:"error"`
	Response *struct {
		GenerateVideoResponse *videoResponse `json:"generateVideoResponse"`
	} `json:"response"`
}

// rpcStatus is a google.rpc.Status.
type rpcStatus struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// videoResponse is the Gemini API's GenerateVideoResponse.
type videoResponse struct {
	GeneratedSamples []struct {
		Video struct {
			URI string `json:"uri"`
		} `json:"video"`
	} `json:"generatedSamples"`
	RAIMediaFilteredCount   int      `json:"raiMediaFilteredCount"`
	RAIMediaFilteredReasons []string `json:"raiMediaFilteredReasons"`
}

// rpcCancelled is google.rpc.Code CANCELLED.
const rpcCancelled = 1

// parseOperation decodes an operation read at now into a normalized status.
func parseOperation(b []byte, now time.Time) (provider.Status, error) {
	var op operation
	if err := json.Unmarshal(b, &op); err != nil {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "malformed operation", Err: err}
	}
	if !operationRe.MatchString(op.Name) {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "operation without a valid name"}
	}
	st := provider.Status{RemoteID: op.Name}
	if !op.Done {
		st.State, st.Raw = state.Running, "done=false"
		return st, nil
	}
	st.Raw = "done=true"
	switch {
	case op.Error != nil:
		st.State = state.Failed
		if op.Error.Code == rpcCancelled {
			st.State = state.Canceled
		}
		st.Reason = strings.TrimSpace(fmt.Sprintf("%s (code %d)", clip(op.Error.Message, 1024), op.Error.Code))
	case op.Response != nil && op.Response.GenerateVideoResponse != nil:
		r := op.Response.GenerateVideoResponse
		for _, s := range r.GeneratedSamples {
			u := s.Video.URI
			if provider.IsOutputURL(u) && len(st.Outputs) < provider.MaxOutputs {
				st.Outputs = append(st.Outputs, u)
			}
		}
		if len(st.Outputs) > 0 {
			st.State = state.Succeeded
			st.OutputsExpireAt = now.Add(OutputRetention)
			return st, nil
		}
		st.State = state.Failed
		st.Reason = filtered(r)
	case op.Response != nil:
		st.State, st.Reason = state.Failed, "the operation finished without a video"
	default:
		// Done with neither error nor response breaks the LRO contract;
		// say nothing final.
		st.State = state.Unknown
	}
	return st, nil
}

// filtered explains a response without videos.
func filtered(r *videoResponse) string {
	reasons := make([]string, 0, len(r.RAIMediaFilteredReasons))
	for _, s := range r.RAIMediaFilteredReasons {
		if s = strings.TrimSpace(s); s != "" && len(reasons) < 5 {
			reasons = append(reasons, clip(s, 512))
		}
	}
	switch {
	case len(reasons) > 0:
		return "blocked by Google's safety filters: " + strings.Join(reasons, "; ")
	case r.RAIMediaFilteredCount > 0:
		return fmt.Sprintf("blocked by Google's safety filters (%d videos filtered, no reason given)", r.RAIMediaFilteredCount)
	}
	return "the operation finished without a video"
}
