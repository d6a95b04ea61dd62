package frontdoor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// ResubmitRequest is the body of POST /v1/jobs/{id}/resubmit (optional).
type ResubmitRequest struct {
	// Reason says why, for the record (the new job's submit_reason).
	Reason string `json:"reason"`
	// Input is the provider input of the new job. Pollux keeps a job's
	// input only while the provider has not had it, so a job that failed,
	// was lost or expired after it was submitted needs it here; without
	// it the old job's kept input is used.
	Input json.RawMessage `json:"input"`
}

// resubmitOne handles POST /v1/jobs/{id}/resubmit: a failed, lost or
// expired job submitted again as a new job (see resubmit), answered as a
// submission is (202 with the new job's links).
func (s *Server) resubmitOne(w http.ResponseWriter, r *http.Request) *apiError {
	body, e := readJSON(w, r, events.MaxMessageBytes)
	if e != nil {
		return e
	}
	var req ResubmitRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return fail(http.StatusBadRequest, CodeInvalidBody, "", "not a JSON object: "+err.Error())
		}
	}
	j, e := s.job(r.Context(), r.PathValue("id"))
	if e != nil {
		return e
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	it, e := s.resubmit(ctx, r, j, req.Reason, req.Input)
	if e != nil {
		return e
	}
	a := accepted(it.NewID, j.Route)
	w.Header().Set("Location", a.Links.Self)
	writeJSON(w, http.StatusAccepted, a)
	return nil
}

// resubmit submits job j again as a new job through the submission path
// (an intake message, as POST /v1/jobs publishes): the same route, model,
// config key, metadata and notify URL, the input given or else the one
// the record kept, the deadline's window (deadline minus creation)
// counted afresh, and resubmit_of naming j — its owner lists the new job
// on j's record when it accepts it. The new id is j's with "-r<n>"
// (resubmitID), so a repeated resubmission of j is the same job. A job
// that may not be resubmitted is a 409 saying why; one resubmitted
// already answers its resubmission.
func (s *Server) resubmit(ctx context.Context, r *http.Request, j *state.Job, reason string, input json.RawMessage) (BulkItem, *apiError) {
	it := BulkItem{ID: j.ID}
	if ok, why := jobs.Resubmittable(j); !ok {
		return it, fail(http.StatusConflict, CodeNotResubmittable, "", "job "+j.ID+" cannot be resubmitted: "+why)
	}
	if j.Routing != nil && j.Routing.HedgeOf != "" {
		return it, fail(http.StatusConflict, CodeNotResubmittable, "", "job "+j.ID+" is a hedge of "+j.Routing.HedgeOf+": resubmit that job")
	}
	if !s.knownRoute(j.Route) {
		return it, fail(http.StatusConflict, CodeNotResubmittable, "", "job "+j.ID+"'s route "+j.Route+" is not configured here")
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = j.Input
	}
	if len(bytes.TrimSpace(input)) == 0 {
		return it, fail(http.StatusConflict, CodeInputNotKept, "input",
			"job "+j.ID+" reached its provider, and its route does not keep inputs after that (keep_inputs): send the input to resubmit it with")
	}
	it.NewID = resubmitID(j)
	switch had, err := s.jobs.Get(ctx, it.NewID); {
	case err == nil && had.ResubmitOf == j.ID:
		return it, nil // resubmitted already: the same job
	case err == nil:
		return it, fail(http.StatusConflict, CodeNotResubmittable, "", "the id "+it.NewID+" of its resubmission is another job's")
	case !errors.Is(err, state.ErrNotFound):
		return it, s.unavailable(err, "reading job "+it.NewID)
	}
	m := events.Submit{
		V: events.Version, ID: it.NewID, Model: j.Model, Input: input, ConfigKey: j.ConfigKey,
		Metadata: j.Metadata, NotifyURL: j.NotifyURL, ExpectedDurationS: time.Duration(j.ExpectedDuration).Seconds(),
		ResubmitOf: j.ID, By: who(r).by(r), Reason: reason, App: j.App,
	}
	if !j.Deadline.IsZero() && j.Deadline.After(j.CreatedAt) {
		m.TimeoutS = min(j.Deadline.Sub(j.CreatedAt), events.MaxExpected).Seconds()
	}
	if e := s.publishSubmit(ctx, r, r.Method+" "+r.URL.Path, j.Route, m); e != nil {
		return it, e
	}
	s.log.Info().Str(logkey.JobID, it.NewID).Str(logkey.ResubmitOf, j.ID).Str(logkey.Route, j.Route).Str(logkey.By, m.By).Msg("resubmission published")
	return it, nil
}

// resubmitID is the id of job j's resubmission: j's id with "-r1", or,
// when j is itself a resubmission "<base>-r<n>", "<base>-r<n+1>". An id
// that would pass events.MaxIDLen keeps a prefix of the base and a hash
// of it.
func resubmitID(j *state.Job) string {
	base, n := j.ID, 1
	if i := strings.LastIndex(j.ID, "-r"); j.ResubmitOf != "" && i > 0 {
		if k, err := strconv.Atoi(j.ID[i+2:]); err == nil && k >= 1 && strconv.Itoa(k) == j.ID[i+2:] {
			base, n = j.ID[:i], k+1
		}
	}
	suffix := "-r" + strconv.Itoa(n)
	if len(base)+len(suffix) > events.MaxIDLen {
		sum := sha256.Sum256([]byte(base))
		base = base[:events.MaxIDLen-len(suffix)-9] + "-" + hex.EncodeToString(sum[:4])
	}
	return base + suffix
}
