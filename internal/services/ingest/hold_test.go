package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Held jobs canceled while their route is resumed at the same moment: a
// job whose cancel was recorded before its create started is never
// created, none is created twice, and those not canceled are created.
func TestACancelOfAHeldJobWinsAgainstAResume(t *testing.T) {
	t.Parallel()
	f := newFake()
	s := start(t, f, config.Route{}, nil)
	ctx := context.Background()
	s.Pauses.SetRecheck(200 * time.Millisecond)
	rt := s.Routes["fake"]
	_, err := s.Pauses.PauseRoute(ctx, "fake", time.Time{}, "alice", "incident")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Pauses.Why(rt) != "" }, 10*time.Second, 10*time.Millisecond)
	const n = 30
	id := func(i int) string { return fmt.Sprintf("h%d", i) }
	for i := range n {
		s.submit(id(i))
	}
	for i := range n {
		j := s.Until(id(i), func(j *state.Job) bool { return j.WaitingFor != "" })
		require.Equal(t, state.Pending, j.State)
		require.Equal(t, "route paused by alice: incident", j.WaitingFor)
	}
	require.Zero(t, f.createsOf(id(0)))

	go_ := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i += 2 {
		wg.Go(func() {
			<-go_
			s.Publish(s.NS.Cancel("fake"), events.Cancel{V: events.Version, ID: id(i), Reason: "not now"})
		})
	}
	wg.Go(func() {
		<-go_
		_, _, err := s.Pauses.ResumeRoute(ctx, "fake")
		require.NoError(t, err)
	})
	close(go_)
	wg.Wait()

	for i := range n {
		if i%2 == 1 {
			j := s.Until(id(i), submitted)
			require.Equal(t, 1, f.createsOf(id(i)), id(i))
			require.Empty(t, j.WaitingFor)
			continue
		}
		j := s.Until(id(i), func(j *state.Job) bool { return j.State == state.Canceled })
		creates := f.createsOf(id(i))
		if j.RemoteID == "" {
			require.Zero(t, creates, "%s was canceled before it was submitted, yet created", id(i))
			continue
		}
		require.Equal(t, 1, creates, id(i))
		require.False(t, j.CancelRequestedAt.Before(j.AttemptedAt),
			"%s was created although its cancel was recorded before its attempt", id(i))
	}
	s.intakeDone()
	for i := range n {
		require.LessOrEqual(t, f.createsOf(id(i)), 1, id(i))
	}
}
