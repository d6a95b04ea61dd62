package learn_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/learn"
	"github.com/pollux-dev/pollux/pkg/state"
)

// How a model's jobs end is learned and shared by the fleet: the rejections' times
// from acceptance and their share apart, the run times from the succeeded
// jobs alone, and every job's time from acceptance as their mixture.
func TestEndsAreLearnedApart(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 2)
	for i := range 400 {
		j := finished(state.Succeeded, 200*time.Second, 150*time.Second)
		if i%20 == 0 {
			// Rejected 5 s after acceptance, reported running from it.
			j = finished(state.Failed, 5*time.Second, 5*time.Second)
		}
		ss[0].Observe(j)
	}
	ss[0].Flush(context.Background())
	for _, s := range ss {
		require.Eventually(t, func() bool {
			times, share := s.Failed("r", "owner/model:v1")
			return times != nil && share > 0.045 && share < 0.055
		}, 5*time.Second, 10*time.Millisecond)
		times, _ := s.Failed("r", "owner/model:v1")
		require.InDelta(t, 5, times.Quantile(0.5).Seconds(), 0.5)
		total, run := s.Lookup("r", "owner/model:v1", "", 0)
		require.InDelta(t, 140, run.Quantile(0.01).Seconds(), 15, "the rejections are not run times")
		require.InDelta(t, 0.95, total.Survival(10*time.Second), 0.01, "every job's end, weighed by the share")
	}
	times, share := ss[0].Failed("r", "other")
	require.Nil(t, times)
	require.Zero(t, share)
}

// A record written before Ends existed still decodes, without it.
func TestRecordsWithoutEndsDecode(t *testing.T) {
	t.Parallel()
	old := `{"route":"r","model":"m","total":{"v":1,"n":3,"first":80,"w":[1,2]},"run":{"v":1,"n":3,"first":70,"w":[3]},` +
		`"updated_at":"2026-11-29T12:00:00Z","ended":3,"failed":1}`
	var r learn.Record
	require.NoError(t, json.Unmarshal([]byte(old), &r))
	require.Nil(t, r.Ends)
	require.Zero(t, r.Ends.Share())
	require.Nil(t, r.Ends.Total())
	require.InDelta(t, 3, r.Total.Weight(), 1e-9)

	r.Ends = &learn.Ends{}
	r.Ends.Observe(5*time.Second, false)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var back learn.Record
	require.NoError(t, json.Unmarshal(b, &back))
	require.InDelta(t, 1, back.Ends.Share(), 1e-9)
}
