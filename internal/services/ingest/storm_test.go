package ingest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/provider"
)

// A rate-limit storm pauses the route, not the job: a create the provider
// refused ten times with a rate limit (each pausing the route a moment),
// then answered with a 5xx once, is tried again after a first failure's
// backoff (about a second), and submitted. Red when the tries the pauses
// sent back count as the job's failures: the 5xx on the eleventh delivery
// waits a minute.
func TestRateLimitsDoNotGrowAJobsBackoff(t *testing.T) {
	t.Parallel()
	f := newFake()
	limited := &provider.Error{Class: provider.RateLimited, HTTPStatus: 429, RetryAfter: 20 * time.Millisecond, Message: "slow down"}
	answers := make([]error, 0, 12)
	for range 10 {
		answers = append(answers, limited)
	}
	f.answers["storm"] = append(answers, &provider.Error{Class: provider.Transient, HTTPStatus: 503, Message: "overloaded"}, nil)
	s := start(t, f, config.Route{}, nil)
	s.submit("storm")
	j := s.Until("storm", submitted)
	require.Equal(t, 12, f.createsOf("storm"))
	require.Equal(t, 1, j.SubmitFailures, "one failure of the job's own; the rate limits were the route's")
	require.Equal(t, 12, j.SubmitAttempts)
}
