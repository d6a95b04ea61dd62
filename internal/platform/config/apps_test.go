package config_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
)

// An app's caps on its jobs: a negative one, or the max_jobs they
// replaced, refuses the start naming the field.
func TestAppCapsNameTheBadField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{"apps: {studio: {max_running: -1}}", "apps.studio.max_running: -1 is negative"},
		{"apps: {studio: {max_waiting: -2}}", "apps.studio.max_waiting: -2 is negative"},
		{"apps: {studio: {rate: .nan}}", "apps.studio.rate: NaN"},
		{"apps: {studio: {max_jobs: 3}}", "max_jobs"},
	} {
		_, err := config.Parse(strings.NewReader("routes: {r: {kind: sim}}\n" + tc.yaml))
		require.ErrorContains(t, err, tc.want, tc.yaml)
	}
	c, err := config.Parse(strings.NewReader("routes: {r: {kind: sim}}\napps: {studio: {max_running: 3, max_waiting: 10}}"))
	require.NoError(t, err)
	require.Equal(t, config.App{MaxRunning: 3, MaxWaiting: 10}, c.Apps["studio"])
}
