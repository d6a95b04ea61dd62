package schedule_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

func TestSleep(t *testing.T) {
	t.Parallel()
	require.True(t, schedule.Sleep(context.Background(), time.Millisecond), "the wait passed")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, schedule.Sleep(ctx, time.Hour), "an ended context cuts the wait short")
}
