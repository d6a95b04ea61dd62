package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// The tokens of the test stacks' tokens file: an operator who may act and
// a reader who may only look.
const (
	actToken  = "act-token-0123456789abcdef"
	readToken = "read-token-0123456789abcdef"
	actName   = "alice"
	readName  = "bob"
)

// The simulated provider's models: quick jobs end in a few seconds of real
// time (time runs 20 times faster), other ones at once, slow ones outlast
// any test.
const (
	quickModel = "console-test/quick"
	otherModel = "console-test/other"
	flakyModel = "console-test/flaky"
	slowModel  = "console-test/slow"
	timeScale  = 20
)

// fleet is a running stack (the simulated provider, the services and the
// front door with the jobs index and the console, as dev.Start wires them)
// a test drives through HTTP and a browser.
type fleet struct {
	*dev.Stack
	js     jetstream.JetStream
	tokens bool // the front door takes tokens
}

// startFleet runs the stack, with the tokens above, until the test ends.
func startFleet(t *testing.T) *fleet {
	t.Helper()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(
		actToken + " admin name=" + actName + "\n" + readToken + " read app=* name=" + readName + "\n"))
	require.NoError(t, err)
	return startFleetWith(t, tokens, false)
}

// startFleetWith runs the stack with tokens (nil: none, every request
// allowed, as pollux serve runs on loopback), its route poll-only when
// pollOnly, until the test ends.
func startFleetWith(t *testing.T, tokens *frontdoor.Tokens, pollOnly bool) *fleet {
	t.Helper()
	return startFleetConfig(t, tokens, pollOnly, config.Route{}, nil)
}

// startFleetConfig is startFleetWith with the route's prices (rc.Prices,
// rc.BillsFailed) and the apps.
func startFleetConfig(t *testing.T, tokens *frontdoor.Tokens, pollOnly bool, rc config.Route, apps map[string]config.App) *fleet {
	t.Helper()
	srv := natstest.Server(t)
	nc, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, g.Wait())
	})
	d := func(x time.Duration) sim.Duration { return sim.Duration(x) }
	st, err := dev.Start(gctx, g, nc, dev.StackConfig{
		Sim: sim.Config{TimeScale: timeScale, Seed: 18, Models: map[string]sim.Model{
			quickModel: {QueueMedian: d(20 * time.Second), QueueSigma: 0.2, RunMedian: d(50 * time.Second), RunSigma: 0.2},
			otherModel: {QueueMedian: d(2 * time.Second), QueueSigma: 0.2, RunMedian: d(8 * time.Second), RunSigma: 0.2},
			flakyModel: {QueueMedian: d(10 * time.Second), QueueSigma: 0.5, RunMedian: d(30 * time.Second), RunSigma: 0.5, FailRate: 0.4},
			slowModel:  {QueueMedian: d(time.Second), QueueSigma: 0.2, RunMedian: d(2 * time.Hour), RunSigma: 0.1},
		}},
		Route:      config.Route{Workers: config.Workers{Submit: 8}, Prices: rc.Prices, BillsFailed: rc.BillsFailed},
		HTTPTokens: tokens,
		Apps:       apps,
		NoWebhooks: pollOnly,
		Logger:     zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	require.NoError(t, err)
	return &fleet{Stack: st, js: js, tokens: tokens != nil}
}

// call makes an API request with the operator's bearer token and decodes
// the JSON answer into out (when not nil); it returns the status.
func (f *fleet) call(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, f.HTTPURL+path, rd)
	require.NoError(t, err)
	if f.tokens {
		req.Header.Set("Authorization", "Bearer "+actToken)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	if out != nil && res.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(data, out), "%s %s: %s", method, path, data)
	}
	return res.StatusCode
}

// submit submits a job of model with the idempotency key and returns its id.
func (f *fleet) submit(t *testing.T, model, key string) string {
	t.Helper()
	var a frontdoor.Accepted
	status := f.call(t, http.MethodPost, "/v1/jobs", map[string]any{
		"v": 1, "route": dev.RouteName, "model": model, "idempotency_key": key, "input": map[string]any{"prompt": key},
	}, &a)
	require.Equal(t, http.StatusAccepted, status)
	return a.ID
}

// routeEvent returns the latest pause or resume of the route in the events
// stream.
func (f *fleet) routeEvent(t *testing.T) *events.RouteEvent {
	t.Helper()
	s, err := f.js.Stream(t.Context(), f.Env.NS.EventsStream())
	require.NoError(t, err)
	msg, err := s.GetLastMsgForSubject(t.Context(), f.Env.NS.RouteEvent(dev.RouteName))
	if err != nil {
		return nil
	}
	ev, err := events.DecodeRouteEvent(msg.Data)
	require.NoError(t, err)
	return ev
}

// createAtProvider creates a prediction at the simulated provider directly,
// as a client that does not go through Pollux would, and returns its id.
func (f *fleet) createAtProvider(t *testing.T, model string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.SimURL+"/v1/models/"+model+"/predictions", strings.NewReader(`{"input":{"prompt":"made elsewhere"}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+f.SimToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	var p struct{ ID string }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&p))
	require.Less(t, res.StatusCode, 300)
	require.NotEmpty(t, p.ID)
	return p.ID
}
