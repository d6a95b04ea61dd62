package simulate

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRank(t *testing.T) {
	t.Parallel()
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	require.Equal(t, 5.0, rank(xs, 0.5))
	require.Equal(t, 10.0, rank(xs, 0.95))
	require.Equal(t, 1.0, rank(xs, 0))
	require.Equal(t, 7.0, rank([]float64{7}, 0.99))
}

func TestFrontier(t *testing.T) {
	t.Parallel()
	f := newFrontier([]Point{
		{MeanDelayS: 8, Polls: 3},
		{MeanDelayS: 1, Polls: 20},
		{MeanDelayS: 4, Polls: 5},
		{MeanDelayS: 2, Polls: 10},
		{MeanDelayS: 3, Polls: 9}, // above the chord from (2,10) to (4,5)
		{MeanDelayS: 9, Polls: 3}, // more delay, no fewer polls
	})
	var xs []float64
	for _, p := range f {
		xs = append(xs, p.MeanDelayS)
	}
	require.Equal(t, []float64{1, 2, 4, 8}, xs)
	tests := []struct {
		delay, polls float64
		ok           bool
	}{
		{1, 20, true},
		{3, 7.5, true},
		{6, 4, true},
		{8, 3, true},
		{0.995, 20, true}, // within 1% of an end: the end
		{0.9, 0, false},
		{8.5, 0, false},
	}
	for _, tt := range tests {
		got, ok := f.at(tt.delay)
		require.Equal(t, tt.ok, ok, "at %v", tt.delay)
		require.InDelta(t, tt.polls, got, 1e-12, "at %v", tt.delay)
	}
	sc := Score{PollsPerJob: 9, MeanDelayS: 3}
	f.compare(&sc)
	require.InDelta(t, 7.5, *sc.OptimalPolls, 1e-12)
	require.InDelta(t, 1.2, *sc.Ratio, 1e-12)
	sc = Score{PollsPerJob: 9, MeanDelayS: 30}
	f.compare(&sc)
	require.Nil(t, sc.Ratio)
}
