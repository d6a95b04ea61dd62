package cli_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// `pollux stats` shows the apps' spend by day, route and model, from KV
// alone.
func TestStatsShowSpendByAppRouteAndModel(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	_, js := natstest.Connect(t, srv)
	ns, err := events.NewNamespace("pollux")
	require.NoError(t, err)
	res, err := ns.Setup(context.Background(), js, events.Options{})
	require.NoError(t, err)
	k := spend.New(spend.Config{Prices: map[string]spend.Prices{"sim": {ByModel: map[string]spend.Price{"*": {Per: spend.PerJob, Amount: 0.75}}}}}, res.Spend)
	for _, j := range []*state.Job{
		{ID: "a", App: "studio", Route: "sim", Model: "acme/video", RemoteID: "r", State: state.Succeeded},
		{ID: "b", App: "rival", Route: "sim", Model: "acme/video", RemoteID: "r", State: state.Succeeded},
	} {
		require.NoError(t, k.Admit(context.Background(), j))
		require.NoError(t, k.Settle(context.Background(), j))
	}
	out, err := run(t, "stats", "--nats-url", srv.ClientURL())
	require.NoError(t, err)
	require.Contains(t, out, "spend, the last 7 days")
	require.Regexp(t, `studio\s+`+time.Now().UTC().Format(time.DateOnly)+`\s+0.75`, out)
	require.Regexp(t, `sim\s+acme/video\s+0.75\s+1`, out)

	out, err = run(t, "stats", "--nats-url", srv.ClientURL(), "--json")
	require.NoError(t, err)
	var got struct{ Spend []spend.AppSpend }
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.Spend, 2)
}
