package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMedian(t *testing.T) {
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	xs := []float64{0.3, -0.1}
	require.InDelta(t, 0.1, median(xs), 1e-12)
	require.Equal(t, []float64{0.3, -0.1}, xs, "the input is left alone")
	require.Equal(t, "+30% -10%", percents(xs))
}
