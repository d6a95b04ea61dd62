package stack_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Every goroutine a stack started has stopped when the package's tests
// end: the services run by Go and the mirror of route pauses.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// idle is a provider that is never called.
type idle struct{}

func (idle) Info() provider.Info { return provider.Info{Kind: "idle"} }
func (idle) Submit(context.Context, provider.SubmitRequest) (provider.Status, error) {
	return provider.Status{}, provider.ErrUnsupported
}
func (idle) Status(context.Context, provider.Ref) (provider.Status, error) {
	return provider.Status{}, provider.ErrUnsupported
}
func (idle) Cancel(context.Context, provider.Ref) (provider.Status, error) {
	return provider.Status{}, provider.ErrUnsupported
}

// A stack holds the route over its adapter, with the route's settings,
// the configuration's model routes over its routes, and an owner over
// the namespace's buckets.
func TestAStackHoldsTheRoutesAndTheOwner(t *testing.T) {
	t.Parallel()
	s := stack.New(t, stack.Config{
		Pollux: &config.Config{
			Prefix: "kit",
			Routes: map[string]config.Route{"r": {Poll: config.Poll{MaxDelay: 7 * time.Minute}}},
			ModelRoutes: map[string]config.ModelRoute{"m": {Members: []config.ModelRouteMember{
				{Route: "r", Model: "m-r"}, {Route: "q", Model: "m-q"}}}},
		},
		Adapters: map[string]provider.Adapter{"r": idle{}, "q": idle{}},
	})
	require.Equal(t, "kit", s.NS.Prefix())
	require.Equal(t, 7*time.Minute, s.Routes["r"].Policy.MaxDelay, "the route's settings")
	require.NotEqual(t, 7*time.Minute, s.Routes["q"].Policy.MaxDelay, "a route without settings has the defaults")
	require.Len(t, s.ModelRoutes["m"].Members, 2)
	now := time.Now().UTC()
	s.Accept(&state.Job{ID: "j", Route: "r", Model: "m", State: state.Pending, CreatedAt: now, Deadline: now.Add(time.Hour)})
	require.Equal(t, state.Pending, s.Job("j").State)
	_, err := s.Res.Jobs.Get(s.Ctx(), "j")
	require.NoError(t, err, "the owner writes the namespace's jobs bucket")
}
