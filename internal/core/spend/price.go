package spend

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Unit is what a price is per: each provider bills one of these.
type Unit string

// The units.
const (
	// PerJob: a price for each job the provider ran.
	PerJob Unit = "job"
	// PerOutputSecond: a price for each second of output the job asked
	// for (its route's length_from).
	PerOutputSecond Unit = "output_second"
	// PerRunSecond: a price for each second the provider ran the job.
	PerRunSecond Unit = "run_second"
)

// Units lists the units.
var Units = []Unit{PerJob, PerOutputSecond, PerRunSecond}

// Price is a route's price for a model.
type Price struct {
	// Per is the unit.
	Per Unit
	// Amount is the price of one unit (a non-negative number, in the
	// currency the budgets are in).
	Amount float64
	// Assumed is the number of units a job's estimate counts when the
	// job does not say (an output length not given, a run time not yet
	// learned); ignored for PerJob.
	Assumed float64
}

// Validate names what is wrong with p.
func (p Price) Validate() error {
	switch {
	case p.Per != PerJob && p.Per != PerOutputSecond && p.Per != PerRunSecond:
		return fmt.Errorf("per: %q is not a unit (job, output_second, run_second)", p.Per)
	case math.IsNaN(p.Amount) || math.IsInf(p.Amount, 0) || p.Amount < 0:
		return fmt.Errorf("price: %v is not a non-negative number", p.Amount)
	case math.IsNaN(p.Assumed) || math.IsInf(p.Assumed, 0) || p.Assumed < 0:
		return fmt.Errorf("assumed_s: %v is not a non-negative number", p.Assumed)
	}
	return nil
}

// Prices are one route's prices by model ("*": any other model), and
// whether its provider bills a job that failed before it started.
type Prices struct {
	ByModel     map[string]Price
	BillsFailed bool
}

// Of returns the price of model (ok false: the route does not price it).
func (ps Prices) Of(model string) (Price, bool) {
	if p, ok := ps.ByModel[model]; ok {
		return p, true
	}
	p, ok := ps.ByModel["*"]
	return p, ok
}

// Estimate is what job j is expected to cost when it is admitted: its
// output length asked for (Length) or run time expected
// (ExpectedDuration) when it says, else the price's Assumed units.
func (p Price) Estimate(j *state.Job) float64 {
	switch p.Per {
	case PerOutputSecond:
		return p.Amount * or(j.Length, p.Assumed)
	case PerRunSecond:
		return p.Amount * or(time.Duration(j.ExpectedDuration).Seconds(), p.Assumed)
	}
	return p.Amount
}

// Actual is what ended job j cost: nothing when its provider never
// started it (no remote id: refused, withdrawn, expired waiting) unless
// billsFailed; a job's price once its provider had it; its output
// length's for a success; its run time's (started, else submitted, to
// completed).
func (p Price) Actual(j *state.Job, billsFailed bool) float64 {
	if j.RemoteID == "" && !billsFailed {
		return 0
	}
	switch p.Per {
	case PerOutputSecond:
		if j.State != state.Succeeded {
			return 0
		}
		return p.Amount * or(j.Length, p.Assumed)
	case PerRunSecond:
		start := j.StartedAt
		if start.IsZero() {
			start = j.SubmittedAt
		}
		if start.IsZero() || j.CompletedAt.Before(start) {
			return 0
		}
		return p.Amount * j.CompletedAt.Sub(start).Seconds()
	}
	return p.Amount
}

func or(v, fallback float64) float64 {
	if v > 0 {
		return v
	}
	return fallback
}

// Budget is an app's limits: the most its jobs may cost a day and a month
// (UTC; 0: no limit).
type Budget struct {
	Day   float64 `json:"day,omitempty"`
	Month float64 `json:"month,omitempty"`
}

// Validate names what is wrong with b.
func (b Budget) Validate() error {
	for _, v := range []struct {
		name string
		v    float64
	}{{"day", b.Day}, {"month", b.Month}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) || v.v < 0 {
			return fmt.Errorf("%s: %v is not a non-negative number", v.name, v.v)
		}
	}
	if b.Day > 0 && b.Month > 0 && b.Day > b.Month {
		return errors.New("day: more than month")
	}
	return nil
}
