package spend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
)

// OverBudgetError refuses an admission that would pass one of its app's
// budgets, or its route's or account's; it says which, what was spent,
// and when the period resets.
type OverBudgetError struct {
	// App is the job's app; Of is whose budget it is ("app studio",
	// "route sim", "account acme"); Period "day" or "month".
	App, Of, Period string
	// Budget is the period's budget, Spent what is counted in it so far
	// (estimates of jobs under way included), Cost the job's estimate.
	Budget, Spent, Cost float64
	// ResetsAt is when the period ends (UTC).
	ResetsAt time.Time
}

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("%s has spent its %s budget: %.4g of %.4g counted (this job's estimate %.4g); it resets at %s",
		e.Of, e.Period, e.Spent, e.Budget, e.Cost, e.ResetsAt.Format(time.RFC3339))
}

// Ledger keeps the apps' spend in the KV bucket pollux-spend: a total per
// app and period ("<app>.day.20261207", "<app>.month.202612"; "_" is the
// app of jobs of none), per route or account with a budget of its own and
// period ("route.<name>.day.20261207", "account.<name>.month.202612"),
// and a reservation per admitted job ("job.<id>"). Every write is a
// compare-and-set.
type Ledger struct {
	kv jetstream.KeyValue
}

// NewLedger is the ledger over bucket kv (events.Resources.Spend).
func NewLedger(kv jetstream.KeyValue) *Ledger { return &Ledger{kv: kv} }

// reservation is an admitted job's record.
type reservation struct {
	App      string    `json:"app"`
	Estimate float64   `json:"estimate"`
	At       time.Time `json:"at"`
	// Settled is set once the job's cost replaced its estimate: the
	// record stays (RecordTTL), so a create retried after the job ended
	// is still the job admitted before, not a new reservation.
	Settled bool `json:"settled,omitempty"`
	// Limits are the routes' and accounts' budgets (Limit.Of) its
	// estimate was reserved in, besides its app's.
	Limits []string `json:"limits,omitempty"`
}

// Limit is a budget of a route or an account: what all its jobs may
// cost, whichever apps they are.
type Limit struct {
	// Of names what it limits: "route <name>" or "account <name>".
	Of     string
	Budget Budget
}

// RecordTTL is how long an admitted job's record is kept: past the
// month its estimate counts in.
const RecordTTL = 40 * 24 * time.Hour

// total is one period's.
type total struct {
	Spent float64 `json:"spent"`
}

// periods are the totals of app a job admitted at at counts in, with
// when each resets.
func periods(app string, at time.Time) []period {
	return periodsOf(events.TenantToken(app), "app "+app, at)
}

// periodsOf are the totals under key prefix a of whose budget is of
// ("app studio", "route sim"), of a job admitted at at.
func periodsOf(a, of string, at time.Time) []period {
	at = at.UTC()
	day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	month := time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
	return []period{
		{name: "day", of: of, key: a + ".day." + day.Format("20060102"), resets: day.AddDate(0, 0, 1)},
		{name: "month", of: of, key: a + ".month." + month.Format("200601"), resets: month.AddDate(0, 1, 0)},
	}
}

// limitPeriods are the totals of the limits of (Limit.Of) a job admitted
// at at counts in: "route x" is under key prefix "route.x", whose three
// tokens no app's two ever match.
func limitPeriods(of []string, at time.Time) []period {
	var ps []period
	for _, o := range of {
		ps = append(ps, periodsOf(strings.Replace(o, " ", ".", 1), o, at)...)
	}
	return ps
}

type period struct {
	name, key string
	// of is whose budget it is ("app studio", "route sim").
	of     string
	resets time.Time
}

func (p period) budget(b Budget) float64 {
	if p.name == "day" {
		return b.Day
	}
	return b.Month
}

// Admit reserves job id's estimate in its app's totals, at most its
// budget b in each period: an *OverBudgetError when it would pass one (and
// nothing is reserved). A job admitted before is admitted again at no
// cost. The totals are reserved before the job's record is written, so a
// process that dies in between leaves an estimate counted without a job —
// the totals err high, never low — and of two admissions of one job at
// once, the one whose record is second gives its reservation back.
//
// The limits of its route and account (more) hold it too: the estimate is
// reserved in theirs, and a job that would pass one is refused.
func (l *Ledger) Admit(ctx context.Context, app, id string, estimate float64, b Budget, at time.Time, more ...Limit) error {
	switch _, err := l.kv.Get(ctx, jobKey(id)); {
	case err == nil:
		return nil // admitted before: a retry, a redelivery, a duplicate
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("reading job %s's spend: %w", id, err)
	}
	r := reservation{App: app, Estimate: estimate, At: at.UTC()}
	budgets := map[string]Budget{"app " + app: b}
	for _, lm := range more {
		r.Limits = append(r.Limits, lm.Of)
		budgets[lm.Of] = lm.Budget
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	ps := r.periods()
	undo := func(done []period) {
		for _, q := range done {
			_ = l.add(context.WithoutCancel(ctx), q, -estimate, 0, app)
		}
	}
	for i, p := range ps {
		if err := l.add(ctx, p, estimate, p.budget(budgets[p.of]), app); err != nil {
			undo(ps[:i])
			return err
		}
	}
	if _, err := l.kv.Create(ctx, jobKey(id), data, jetstream.KeyTTL(RecordTTL)); errors.Is(err, jetstream.ErrKeyExists) {
		undo(ps) // admitted meanwhile by another process
		return nil
	} else if err != nil {
		undo(ps)
		return fmt.Errorf("recording job %s's spend: %w", id, err)
	}
	return nil
}

// Release undoes job id's admission, when nothing was made of it (its
// create was not stored): its estimate is given back, and its record
// goes, so that a retry is admitted afresh.
func (l *Ledger) Release(ctx context.Context, id string) error {
	e, err := l.kv.Get(ctx, jobKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading job %s's spend: %w", id, err)
	}
	var r reservation
	if err := json.Unmarshal(e.Value(), &r); err != nil || r.Settled {
		return err
	}
	if err := l.kv.Delete(ctx, jobKey(id), jetstream.LastRevision(e.Revision())); err != nil {
		return fmt.Errorf("releasing job %s's spend: %w", id, err)
	}
	for _, p := range r.periods() {
		if err := l.add(ctx, p, -r.Estimate, 0, r.App); err != nil {
			return err
		}
	}
	return nil
}

// Settle counts ended job id's actual cost in place of its estimate, once,
// and on its day's line of route and model (Keeper.Report); a job never
// admitted (not priced) is nothing. It returns the job's app.
func (l *Ledger) Settle(ctx context.Context, id string, actual float64, route, model string) (app string, err error) {
	e, err := l.kv.Get(ctx, jobKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading job %s's spend: %w", id, err)
	}
	var r reservation
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return "", fmt.Errorf("job %s's spend record: %w", id, err)
	}
	if r.Settled {
		return r.App, nil
	}
	// Marked settled first, at the revision read: of two settlements one
	// counts. A crash right after leaves the estimate counted.
	r.Settled = true
	data, err := json.Marshal(r)
	if err != nil {
		return r.App, err
	}
	if _, err := l.kv.Update(ctx, jobKey(id), data, e.Revision()); errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return r.App, nil
	} else if err != nil {
		return r.App, fmt.Errorf("settling job %s's spend: %w", id, err)
	}
	if d := actual - r.Estimate; d != 0 {
		for _, p := range r.periods() {
			if err := l.add(ctx, p, d, 0, r.App); err != nil {
				return r.App, err
			}
		}
	}
	return r.App, l.addLine(ctx, r.App, r.At, route, model, actual)
}

// Spent is app's totals of the day and month of at.
func (l *Ledger) Spent(ctx context.Context, app string, at time.Time) (day, month float64, err error) {
	return l.spent(ctx, periods(app, at))
}

// SpentOf is the totals of a route's or an account's limit (Limit.Of) of
// the day and month of at.
func (l *Ledger) SpentOf(ctx context.Context, of string, at time.Time) (day, month float64, err error) {
	return l.spent(ctx, limitPeriods([]string{of}, at))
}

func (l *Ledger) spent(ctx context.Context, ps []period) (day, month float64, err error) {
	out := [2]float64{}
	for i, p := range ps {
		t, _, err := l.read(ctx, p.key)
		if err != nil {
			return 0, 0, err
		}
		out[i] = t.Spent
	}
	return out[0], out[1], nil
}

// add moves a period's total by d, refusing to pass limit (> 0) when d is
// positive; compare-and-set, retried on a conflict.
func (l *Ledger) add(ctx context.Context, p period, d, limit float64, app string) error {
	for {
		t, rev, err := l.read(ctx, p.key)
		if err != nil {
			return err
		}
		if d > 0 && limit > 0 && t.Spent+d > limit {
			return &OverBudgetError{App: app, Of: p.of, Period: p.name, Budget: limit, Spent: t.Spent, Cost: d, ResetsAt: p.resets}
		}
		t.Spent = max(0, t.Spent+d)
		data, err := json.Marshal(t)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = l.kv.Create(ctx, p.key, data)
		} else {
			_, err = l.kv.Update(ctx, p.key, data, rev)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // another process moved it: read again
		default:
			return fmt.Errorf("updating %s: %w", p.key, err)
		}
	}
}

func (l *Ledger) read(ctx context.Context, key string) (total, uint64, error) {
	e, err := l.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return total{}, 0, nil
	case err != nil:
		return total{}, 0, fmt.Errorf("reading %s: %w", key, err)
	}
	var t total
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return total{}, 0, fmt.Errorf("%s: %w", key, err)
	}
	return t, e.Revision(), nil
}

func jobKey(id string) string { return "job." + id }

// periods are the totals the reserved job counts in: its app's, then its
// limits'.
func (r reservation) periods() []period {
	return append(periods(r.App, r.At), limitPeriods(r.Limits, r.At)...)
}
