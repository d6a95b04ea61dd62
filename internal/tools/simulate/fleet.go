package simulate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/learn"
	"github.com/pollux-dev/pollux/pkg/state"
)

// History selects the finished jobs of the fleet a trace is made of.
type History struct {
	// Route is the route whose jobs are read (required).
	Route string
	// Model keeps only this model's jobs, every configuration of it
	// (default: all the route's models).
	Model string
	// Since keeps only jobs the provider accepted at or after this time
	// (default: all the bucket holds).
	Since time.Time
}

// Fleet is what reading the fleet's history found.
type Fleet struct {
	// Jobs is the trace, in submit order, times from the first job's
	// acceptance.
	Jobs []Job
	// First is when the first job of the trace was accepted.
	First time.Time
	// Read counts the records read; Unreadable those that did not decode.
	Read, Unreadable int
	// Skipped counts the route's finished jobs (of the model, in the
	// window) that teach nothing of the provider's durations: expired,
	// lost and user-canceled ones, and those without both times.
	Skipped int
}

// ProgressEvery is how many records ReadFleet reads between two calls of
// its progress function.
const ProgressEvery = 2000

// ReadFleet reads the jobs bucket through its owner and makes a trace of
// the route's finished jobs: h's route, model and window, in submit
// order. progress (may be nil) is called every ProgressEvery records with
// the records read and the jobs kept so far, and once at the end. A
// bucket without one such job is an error naming the selection.
func ReadFleet(ctx context.Context, owner *jobs.Owner, h History, progress func(read, kept int)) (*Fleet, error) {
	if h.Route == "" {
		return nil, errors.New("read fleet: no route")
	}
	f := &Fleet{}
	var finished []*state.Job
	err := owner.Each(ctx, func(j *state.Job, err error) error {
		f.Read++
		if progress != nil && f.Read%ProgressEvery == 0 {
			progress(f.Read, len(finished))
		}
		switch {
		case err != nil:
			f.Unreadable++
		case h.selects(j):
			finished = append(finished, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read fleet: %w", err)
	}
	if progress != nil {
		progress(f.Read, len(finished))
	}
	f.Jobs, f.First, f.Skipped = Trace(finished)
	if len(f.Jobs) == 0 {
		return f, fmt.Errorf("read fleet: no finished job of %s to learn from among %d records (%d skipped: expired, lost or canceled by the user)", h, f.Read, f.Skipped)
	}
	return f, nil
}

// selects reports whether j is a finished job of h's route, model and
// window.
func (h History) selects(j *state.Job) bool {
	return j.Route == h.Route && (h.Model == "" || j.Model == h.Model) &&
		j.State.Terminal() && !submitted(j).Before(h.Since)
}

func (h History) String() string {
	s := "route " + h.Route
	if h.Model != "" {
		s += " model " + h.Model
	}
	if !h.Since.IsZero() {
		s += " since " + h.Since.UTC().Format(time.RFC3339)
	}
	return s
}

// submitted is when the provider accepted j, else when Pollux did.
func submitted(j *state.Job) time.Time {
	if !j.SubmittedAt.IsZero() {
		return j.SubmittedAt
	}
	return j.CreatedAt
}

// minDuration is the shortest duration a trace holds: a trace has
// millisecond resolution, and a duration must be > 0.
const minDuration = 0.001

// Trace makes a trace of finished job records: those that teach the
// provider's durations (learn.Durations: succeeded, failed, and canceled
// by the provider), in submit order, times in seconds from the first's
// acceptance. Each job's model is its model, with its configuration key
// as "model[config]" when it has one; its queue time is from acceptance
// to its start when the provider reported one, else 0. skipped counts
// the records left out.
func Trace(records []*state.Job) (trace []Job, first time.Time, skipped int) {
	type rec struct {
		j               *state.Job
		at              time.Time
		total, queueFor time.Duration
	}
	var kept []rec
	for _, j := range records {
		total, _, ok := learn.Durations(j)
		if !ok {
			skipped++
			continue
		}
		at := submitted(j)
		var queue time.Duration
		if !j.StartedAt.IsZero() {
			queue = min(max(j.StartedAt.Sub(at), 0), total)
		}
		kept = append(kept, rec{j: j, at: at, total: total, queueFor: queue})
	}
	slices.SortStableFunc(kept, func(a, b rec) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.j.ID, b.j.ID))
	})
	if len(kept) == 0 {
		return nil, time.Time{}, skipped
	}
	first = kept[0].at
	trace = make([]Job, len(kept))
	for i, r := range kept {
		model := r.j.Model
		if r.j.ConfigKey != "" {
			model += "[" + r.j.ConfigKey + "]"
		}
		d := max(r.total.Seconds(), minDuration)
		trace[i] = Job{
			Model: model, Submit: r.at.Sub(first).Seconds(),
			Queue: min(r.queueFor.Seconds(), d), Duration: d, Outcome: string(r.j.State),
		}
	}
	return trace, first, skipped
}
