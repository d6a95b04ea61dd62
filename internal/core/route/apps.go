package route

import (
	"context"
	"slices"
	"strings"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// slots are the running slots job of app takes on the route: its app's
// level (GateConfig.Apps; an app's cap is met first, whichever route its
// jobs take), then the route's levels, narrowest first.
func (g *Gate) slots(ctx context.Context, app string) (budget.Slots, error) {
	r, err := g.cfg.Apps.Running(ctx, app)
	if r == nil || err != nil {
		return g.running, err
	}
	return slices.Concat(budget.Slots{r}, g.running), nil
}

// Take takes job's running slot at every level that caps running jobs —
// its app's (app) and the route's — at which it holds none by have (its
// record's slots), and returns the slots it holds then; full names the
// level that is full ("account x", "app y"; "" when none is), and the
// job waits: it took nothing. A job that takes its slots is no longer
// waiting: its app's waiting slot is freed (an error there is left to
// the repair).
func (g *Gate) Take(ctx context.Context, job, app string, have []state.Slot) (held []state.Slot, full string, err error) {
	slots, err := g.slots(ctx, app)
	if err != nil {
		return have, "", err
	}
	held, lvl, err := slots.Take(ctx, job, have)
	if lvl != nil {
		full = lvl.Level().String()
	}
	if err == nil && lvl == nil {
		_ = g.cfg.Apps.Started(ctx, app, job)
	}
	return held, full, err
}

// Free frees job's running slots (its app's, app, and the route's) at
// the levels it holds none at by keep.
func (g *Gate) Free(ctx context.Context, job, app string, keep []state.Slot) error {
	slots, err := g.slots(ctx, app)
	if err != nil {
		return err
	}
	return slots.Free(ctx, job, keep)
}

// AppFull reports whether full (Take's) names an app's level: the app's
// other jobs would find it full too, while other apps' need not.
func AppFull(full string) bool {
	return strings.HasPrefix(full, events.LevelApp+" ")
}
