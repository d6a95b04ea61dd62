package frontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// DefaultMaxBulk is how many jobs one bulk action acts on at most, unless
// Config.MaxBulk says otherwise.
const DefaultMaxBulk = 1000

// Bulk action bounds.
const (
	// bulkSample is how many of the matched ids a bulk answer shows.
	bulkSample = 20
	// bulkWorkers is how many jobs a bulk action works on at once.
	bulkWorkers = 8
	// bulkTime bounds one bulk call (and its response's write).
	bulkTime = 2 * time.Minute
	// maxBulkBody is the largest bulk request body: a selection of ids.
	maxBulkBody = 256 << 10
)

// filterKeys are the fields of a bulk action's filter: GET /v1/jobs's
// query parameters (but cursor and limit).
var filterKeys = []string{"state", "route", "model", "q", "created_after", "created_before"}

// BulkRequest is the body of POST /v1/jobs/cancel and /v1/jobs/resubmit.
type BulkRequest struct {
	// IDs is a selection of jobs (at most the bulk limit), or Filter
	// selects the jobs GET /v1/jobs would list with these parameters;
	// exactly one of the two.
	IDs    []string          `json:"ids"`
	Filter map[string]string `json:"filter"`
	// Reason says why, for the record of each job.
	Reason string `json:"reason"`
	// Confirm is the number of jobs the caller saw matched (a dry run's
	// Matched). Without it the call is a dry run; with it, it acts only
	// when as many jobs match now (else 409 confirm_mismatch).
	Confirm *int `json:"confirm"`
}

// BulkResult answers a bulk action.
type BulkResult struct {
	// Action is "cancel" or "resubmit".
	Action string `json:"action"`
	// Matched is how many jobs the selection or filter matches; Limit how
	// many one call acts on at most (more is refused: 422).
	Matched int `json:"matched"`
	Limit   int `json:"limit"`
	// DryRun is true when nothing was done (no confirm given).
	DryRun bool `json:"dry_run"`
	// Sample is some of the matched ids (at most 20), newest first for a
	// filter.
	Sample []string `json:"sample"`
	// Accepted and Skipped count the jobs acted on and left, and Results
	// says for each (not on a dry run).
	Accepted int        `json:"accepted"`
	Skipped  int        `json:"skipped"`
	Results  []BulkItem `json:"results"`
}

// BulkItem is the outcome of a bulk action on one job.
type BulkItem struct {
	// ID is the job.
	ID string `json:"id"`
	// Outcome is "accepted" (the request is published) or "skipped".
	Outcome string `json:"outcome"`
	// Why says why a job was skipped, with Code its error code.
	Why  string `json:"why,omitempty"`
	Code Code   `json:"code,omitempty"`
	// NewID is a resubmission's new job.
	NewID string `json:"new_id,omitempty"`
}

// bulkAction is what a bulk action does to one job; a nil error means
// accepted.
type bulkAction func(ctx context.Context, r *http.Request, j *state.Job, reason string) (BulkItem, *apiError)

// bulkCancel handles POST /v1/jobs/cancel.
func (s *Server) bulkCancel(w http.ResponseWriter, r *http.Request) *apiError {
	return s.bulk(w, r, "cancel", func(ctx context.Context, r *http.Request, j *state.Job, reason string) (BulkItem, *apiError) {
		return BulkItem{ID: j.ID}, s.requestCancel(ctx, r, j, reason)
	})
}

// bulkResubmit handles POST /v1/jobs/resubmit.
func (s *Server) bulkResubmit(w http.ResponseWriter, r *http.Request) *apiError {
	return s.bulk(w, r, "resubmit", func(ctx context.Context, r *http.Request, j *state.Job, reason string) (BulkItem, *apiError) {
		return s.resubmit(ctx, r, j, reason, nil)
	})
}

// bulk runs a bulk action: it matches the jobs, answers a dry run without
// a confirm, and otherwise does act to each job — the single-job path of
// the action — when the confirm is the number matched now.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request, action string, act bulkAction) *apiError {
	body, e := readJSON(w, r, maxBulkBody)
	if e != nil {
		return e
	}
	var req BulkRequest
	if err := json.Unmarshal(bytes.TrimSpace(body), &req); err != nil {
		return fail(http.StatusBadRequest, CodeInvalidBody, "", "not a bulk request (ids or filter, reason, confirm): "+err.Error())
	}
	// The reason goes into each job's message: checked once, up front.
	if _, err := events.DecodeCancel(fmt.Appendf(nil, `{"v":%d,"id":"x","reason":%q}`, events.Version, req.Reason)); err != nil {
		return invalid(err)
	}
	ids, e := s.match(tenant.From(r.Context()), req)
	if e != nil {
		return e
	}
	res := BulkResult{Action: action, Matched: len(ids), Limit: s.maxBulk(), Sample: ids[:min(len(ids), bulkSample)], Results: []BulkItem{}}
	switch {
	case req.Confirm == nil:
		res.DryRun = true
		writeJSON(w, http.StatusOK, res)
		return nil
	case *req.Confirm != len(ids):
		return fail(http.StatusConflict, CodeConfirmMismatch, "confirm",
			fmt.Sprintf("%d jobs match now, not the %d confirmed: look again and confirm %d", len(ids), *req.Confirm, len(ids)))
	}
	ctx, cancel := context.WithTimeout(r.Context(), bulkTime)
	defer cancel()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(bulkTime + 10*time.Second))
	res.Results = make([]BulkItem, len(ids))
	var g errgroup.Group
	g.SetLimit(bulkWorkers)
	for i, id := range ids {
		g.Go(func() error {
			res.Results[i] = s.actOn(ctx, r, id, req.Reason, act)
			return nil
		})
	}
	_ = g.Wait()
	for _, it := range res.Results {
		if it.Outcome == "accepted" {
			res.Accepted++
		} else {
			res.Skipped++
		}
	}
	s.log.Info().Str(logkey.Action, action).Str(logkey.By, who(r).by(r)).Int(logkey.Matched, len(ids)).Int(logkey.Accepted, res.Accepted).
		Int("skipped", res.Skipped).Str(logkey.Reason, req.Reason).Msg("bulk action done")
	writeJSON(w, http.StatusOK, res)
	return nil
}

// actOn reads job id and does act to it.
func (s *Server) actOn(ctx context.Context, r *http.Request, id, reason string, act bulkAction) BulkItem {
	j, e := s.job(ctx, id)
	if e == nil {
		var it BulkItem
		if it, e = act(ctx, r, j, reason); e == nil {
			it.Outcome = "accepted"
			return it
		}
	}
	return BulkItem{ID: id, Outcome: "skipped", Why: e.detail.Message, Code: e.detail.Code}
}

// maxBulk is the most jobs one bulk action acts on.
func (s *Server) maxBulk() int {
	if s.cfg.MaxBulk > 0 {
		return s.cfg.MaxBulk
	}
	return DefaultMaxBulk
}

// match returns the ids a bulk request selects: its ids (deduplicated,
// in order), or those of the jobs its filter matches in the index, newest
// first, of those viewer sees (named ids it may not see are skipped as unknown
// ones are). More than maxBulk is a 422.
func (s *Server) match(viewer tenant.Viewer, req BulkRequest) ([]string, *apiError) {
	limit := s.maxBulk()
	tooMany := func(n string) *apiError {
		return fail(http.StatusUnprocessableEntity, CodeTooManyJobs, "",
			fmt.Sprintf("%s jobs match, more than the %d one call acts on: narrow the filter (a route, a state, a time range) and act in parts", n, limit))
	}
	switch {
	case req.IDs != nil && req.Filter != nil:
		return nil, fail(http.StatusBadRequest, CodeInvalidBody, "", "send ids or a filter, not both")
	case req.IDs != nil:
		if len(req.IDs) > limit {
			return nil, tooMany(fmt.Sprint(len(req.IDs)))
		}
		ids := make([]string, 0, len(req.IDs))
		for _, id := range req.IDs {
			if !events.ValidToken(id) {
				return nil, fail(http.StatusBadRequest, CodeInvalidField, "ids", fmt.Sprintf("%q: a job id is 1-128 characters of [A-Za-z0-9_-]", id))
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil, fail(http.StatusBadRequest, CodeInvalidField, "ids", "ids: name at least one job")
		}
		return ids, nil
	case req.Filter == nil:
		return nil, fail(http.StatusBadRequest, CodeInvalidBody, "", "send ids (a selection) or a filter (as GET /v1/jobs's parameters)")
	}
	if s.cfg.Index == nil {
		return nil, noIndex()
	}
	v := url.Values{}
	for k, val := range req.Filter {
		if !slices.Contains(filterKeys, k) {
			return nil, fail(http.StatusBadRequest, CodeInvalidField, "filter", fmt.Sprintf("filter: %q is not a filter (filters: %s)", k, strings.Join(filterKeys, ", ")))
		}
		if strings.TrimSpace(val) != "" {
			v.Set(k, val)
		}
	}
	if len(v) == 0 {
		return nil, fail(http.StatusBadRequest, CodeInvalidField, "filter", "filter: name at least one of "+strings.Join(filterKeys, ", "))
	}
	q, e := parseQuery(v)
	if e != nil {
		e.detail.Field = "filter." + e.detail.Field
		return nil, e
	}
	q.Limit, q.Viewer = index.MaxLimit, viewer
	var ids []string
	for {
		page, err := s.cfg.Index.List(q)
		if err != nil {
			return nil, fail(http.StatusBadRequest, CodeInvalidField, "filter", err.Error())
		}
		if page.TotalCapped || page.Total > limit {
			return nil, tooMany(fmt.Sprint(page.Total))
		}
		for _, e := range page.Jobs {
			ids = append(ids, e.ID)
		}
		if len(ids) > limit {
			return nil, tooMany(fmt.Sprintf("more than %d", limit))
		}
		if page.Next == "" {
			return ids, nil
		}
		q.Cursor = page.Next
	}
}
