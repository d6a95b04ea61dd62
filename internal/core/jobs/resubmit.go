package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// MaxResubmittedAs bounds state.Job.ResubmittedAs: a job lists at most
// this many resubmissions (the newest kept).
const MaxResubmittedAs = 16

// Resubmittable reports whether a job may be resubmitted as a new job —
// it failed, was lost or expired — and, when not, says why. A canceled
// job is not: its cancel was someone's decision, and a new submission
// (not a resubmission) undoes it.
func Resubmittable(j *state.Job) (bool, string) {
	switch j.State {
	case state.Failed, state.Lost, state.Expired:
		return true, ""
	case state.Canceled:
		return false, "it was canceled: submit it anew instead"
	}
	if j.State.Terminal() {
		return false, "it " + string(j.State)
	}
	return false, "it has not finished (" + string(j.State) + "): cancel it first, or wait"
}

// linkResubmission writes, on the job j resubmits (j.ResubmitOf), that j
// resubmits it (state.Job.ResubmittedAs), once: Accept calls it for every
// submission that says it resubmits a job, created or a duplicate, so a
// link whose write failed is made by the submission's redelivery. A
// failure does not fail the acceptance of j (the new job is what
// matters): it is retried while ctx lasts, then logged.
func (o *Owner) linkResubmission(ctx context.Context, j *state.Job, log zerolog.Logger) {
	old, id := j.ResubmitOf, j.ID
	if old == id {
		return
	}
	err := o.keepRetrying(ctx, log, "linking the job it resubmits", func(ctx context.Context) error {
		_, err := o.store.mutate(ctx, old, Record{}, func(cur *state.Job) error {
			if slices.Contains(cur.ResubmittedAs, id) {
				return errNoWrite
			}
			cur.ResubmittedAs = append(cur.ResubmittedAs, id)
			if n := len(cur.ResubmittedAs); n > MaxResubmittedAs {
				cur.ResubmittedAs = cur.ResubmittedAs[n-MaxResubmittedAs:]
			}
			return nil
		})
		if errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("%w: %w", errPermanent, err)
		}
		return err
	})
	if err != nil {
		log.Warn().Err(err).Str(logkey.ResubmitOf, old).Msg("the job's record does not list this resubmission")
	}
}
