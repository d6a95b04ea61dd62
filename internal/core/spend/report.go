package spend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
)

// Line is what one route and model cost an app in a day.
type Line struct {
	Route string  `json:"route"`
	Model string  `json:"model"`
	Cost  float64 `json:"cost"`
	// Jobs counts the jobs that ended (their cost counted, nothing or
	// not).
	Jobs int `json:"jobs"`
}

// Day is an app's day: its total (ended jobs' costs, estimates of jobs
// under way) and the ended jobs' costs by route and model.
type Day struct {
	Date  string  `json:"date"` // YYYY-MM-DD, UTC
	Spent float64 `json:"spent"`
	By    []Line  `json:"by"`
}

// AppSpend is an app's spend over a report's days.
type AppSpend struct {
	// App is the app ("" for jobs of none).
	App string `json:"app"`
	// Budget is its budgets (zero: none).
	Budget Budget `json:"budget"`
	// Month is what its current month counts.
	Month float64 `json:"month"`
	// Days are the report's days that count anything, oldest first.
	Days []Day `json:"days"`
}

// MaxReportDays bounds a report.
const MaxReportDays = 92

// lineKey is the key of an app's day's line of route and model (their
// names are not subject tokens: a hash of them is).
func lineKey(app string, day time.Time, route, model string) string {
	sum := sha256.Sum256([]byte(route + "\x00" + model))
	return events.TenantToken(app) + ".by." + day.Format("20060102") + "." + hex.EncodeToString(sum[:8])
}

// addLine counts an ended job's cost on its day's line.
func (l *Ledger) addLine(ctx context.Context, app string, at time.Time, route, model string, cost float64) error {
	key := lineKey(app, at.UTC(), route, model)
	for {
		var ln Line
		var rev uint64
		e, err := l.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			ln = Line{Route: route, Model: model}
		case err != nil:
			return fmt.Errorf("reading %s: %w", key, err)
		default:
			if err := json.Unmarshal(e.Value(), &ln); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			rev = e.Revision()
		}
		ln.Cost += cost
		ln.Jobs++
		data, err := json.Marshal(ln)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = l.kv.Create(ctx, key, data)
		} else {
			_, err = l.kv.Update(ctx, key, data, rev)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue
		default:
			return fmt.Errorf("updating %s: %w", key, err)
		}
	}
}

// Report is the spend of the apps the caller may see — one app's when
// only is set, every app's otherwise — over the days days up to now,
// with their budgets.
func (k *Keeper) Report(ctx context.Context, only bool, app string, days int, now time.Time) ([]AppSpend, error) {
	days = min(max(days, 1), MaxReportDays)
	now = now.UTC()
	first := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1-days)
	filter := "*.day.*"
	if only {
		filter = events.TenantToken(app) + ".day.*"
	}
	lister, err := k.ledger.kv.ListKeysFiltered(ctx, filter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return []AppSpend{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the spend: %w", err)
	}
	byApp := map[string]*AppSpend{}
	for key := range lister.Keys() {
		tok, date, ok := strings.Cut(strings.Replace(key, ".day.", "|", 1), "|")
		d, err := time.Parse("20060102", date)
		if !ok || err != nil || d.Before(first) {
			continue
		}
		name := tok
		if tok == events.NoTenant {
			name = ""
		}
		a := byApp[tok]
		if a == nil {
			a = &AppSpend{App: name, Budget: k.Budget(name)}
			if _, a.Month, err = k.ledger.Spent(ctx, name, now); err != nil {
				return nil, err
			}
			byApp[tok] = a
		}
		t, _, err := k.ledger.read(ctx, key)
		if err != nil {
			return nil, err
		}
		day := Day{Date: d.Format(time.DateOnly), Spent: t.Spent, By: []Line{}}
		if day.By, err = k.ledger.lines(ctx, tok, d); err != nil {
			return nil, err
		}
		a.Days = append(a.Days, day)
	}
	out := make([]AppSpend, 0, len(byApp))
	for _, a := range byApp {
		slices.SortFunc(a.Days, func(x, y Day) int { return strings.Compare(x.Date, y.Date) })
		out = append(out, *a)
	}
	slices.SortFunc(out, func(x, y AppSpend) int { return strings.Compare(x.App, y.App) })
	return out, nil
}

// lines are an app's (by its token) lines of a day, by route and model.
func (l *Ledger) lines(ctx context.Context, tok string, day time.Time) ([]Line, error) {
	lister, err := l.kv.ListKeysFiltered(ctx, tok+".by."+day.Format("20060102")+".*")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return []Line{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []Line{}
	for key := range lister.Keys() {
		e, err := l.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var ln Line
		if json.Unmarshal(e.Value(), &ln) == nil {
			out = append(out, ln)
		}
	}
	slices.SortFunc(out, func(x, y Line) int { return strings.Compare(x.Route+"\x00"+x.Model, y.Route+"\x00"+y.Model) })
	return out, nil
}

// LimitSpend is a route's or an account's spend budget (Limit) and what
// its current day and month count, every app's jobs together.
type LimitSpend struct {
	// Of is "route <name>" or "account <name>".
	Of     string  `json:"of"`
	Budget Budget  `json:"budget"`
	Day    float64 `json:"day"`
	Month  float64 `json:"month"`
}

// LimitsSpent reads the current day and month (of now) of every route's
// and account's spend budget the keeper holds, by Of.
func (k *Keeper) LimitsSpent(ctx context.Context, now time.Time) ([]LimitSpend, error) {
	if k == nil {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []LimitSpend
	for _, ls := range k.cfg.Limits {
		for _, lm := range ls {
			if seen[lm.Of] {
				continue // an account's, for each of its routes
			}
			seen[lm.Of] = true
			day, month, err := k.ledger.SpentOf(ctx, lm.Of, now)
			if err != nil {
				return nil, err
			}
			out = append(out, LimitSpend{Of: lm.Of, Budget: lm.Budget, Day: day, Month: month})
		}
	}
	slices.SortFunc(out, func(a, b LimitSpend) int { return strings.Compare(a.Of, b.Of) })
	return out, nil
}
