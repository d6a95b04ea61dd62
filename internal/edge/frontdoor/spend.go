package frontdoor

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/internal/platform/problem"
	"github.com/pollux-dev/pollux/pkg/events"
)

// admitSpend admits submission m of job id on route for its app
// (Config.Spend): a create past its app's max_waiting, or that would pass
// its budget, is answered 429 budget_exceeded, saying the cap, or the
// budget, what is spent and when it resets (Retry-After: then; a second
// for max_waiting), and nothing is published. A create admitted before (a
// retry) is admitted again at no cost.
func (s *Server) admitSpend(ctx context.Context, route, id string, m events.Submit) *apiError {
	err := s.cfg.Spend.AdmitSubmit(ctx, route, id, m)
	if b := spend.Refusal(err); b != nil {
		return overBudget(err, b, s.cfg.Now())
	}
	if err != nil {
		return s.unavailable(err, "admitting the job's spend")
	}
	return nil
}

// overBudget is the 429 of a create its app's limit b refused (err says
// how): until its period resets, or a second for max_waiting.
func overBudget(err error, b *events.RejectedBudget, now time.Time) *apiError {
	wait := time.Second
	if !b.ResetsAt.IsZero() {
		wait = max(b.ResetsAt.Sub(now), time.Second)
	}
	e := fail(http.StatusTooManyRequests, CodeBudgetExceeded, b.Field(), err.Error())
	e.detail.Budget = &problem.Budget{Of: b.Of, Period: b.Period, Budget: b.Budget, Spent: b.Spent, Estimate: b.Estimate, ResetsAt: b.ResetsAt}
	e.header = http.Header{}
	e.header.Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	e.retryAfter = wait
	return e
}

// SpendReport is what GET /v1/spend answers.
type SpendReport struct {
	// Apps are the apps the caller may see that count anything in the
	// report's days, by name: an app's tokens see their app only.
	Apps []spend.AppSpend `json:"apps"`
	// Days is how many days the report covers, up to today (UTC).
	Days int `json:"days"`
	// Limits are the routes' and accounts' spend budgets with what their
	// current day and month count — every app's jobs together, so an
	// operator's only (tenant.Viewer.SeesFleet); absent without any.
	Limits []spend.LimitSpend `json:"limits,omitempty"`
}

// spendReport handles GET /v1/spend?days=N (1-92, default 30): the spend
// of the apps the caller may see, per day, route and model, with their
// budgets.
func (s *Server) spendReport(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Spend == nil {
		return fail(http.StatusServiceUnavailable, CodeUnavailable, "", "this front door keeps no spend (run it from cmd/ingest or pollux serve, which do)")
	}
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > spend.MaxReportDays {
			return fail(http.StatusBadRequest, CodeInvalidParameter, "days", fmt.Sprintf("must be a whole number from 1 to %d", spend.MaxReportDays))
		}
		days = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	v := tenant.From(r.Context())
	apps, err := s.cfg.Spend.Report(ctx, v.Scoped, v.App, days, s.cfg.Now())
	if err != nil {
		return s.unavailable(err, "reading the spend")
	}
	out := SpendReport{Apps: apps, Days: days}
	if v.SeesFleet() {
		if out.Limits, err = s.cfg.Spend.LimitsSpent(ctx, s.cfg.Now()); err != nil {
			return s.unavailable(err, "reading the spend")
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
