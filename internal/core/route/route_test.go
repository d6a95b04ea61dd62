package route_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

func TestBuildTheShippedExample(t *testing.T) {
	t.Setenv("REPLICATE_API_TOKEN", "r8_example")
	t.Setenv("SIM_TOKEN", "dev")
	c, err := config.Load("../../../deploy/pollux.yaml")
	require.NoError(t, err)
	routes, err := route.Build(c, route.Registry, nil, 1, zerolog.Nop())
	require.NoError(t, err)
	r := routes["replicate"]
	require.NotNil(t, r.Webhooks)
	require.Equal(t, time.Hour, r.Deadline)
	require.Equal(t, 16, r.StatusWorkers)
	require.Equal(t, 60*time.Second, r.Policy.MaxDelay)
	require.Equal(t, "https://hooks.example.com/webhooks/replicate?job=job-1", r.JobWebhookURL("job-1"))
	require.Empty(t, routes["sim"].JobWebhookURL("job-1"), "no webhook URL, no webhook")
}

func TestBuildNamesTheMissingSecret(t *testing.T) {
	c, err := config.Load("../../../deploy/pollux.yaml")
	require.NoError(t, err)
	t.Setenv("SIM_TOKEN", "dev")
	_, err = route.Build(c, route.Registry, nil, 1, zerolog.Nop())
	require.ErrorContains(t, err, "REPLICATE_API_TOKEN is not set")
}

func TestBuildRejectsAnUnknownKind(t *testing.T) {
	c := &config.Config{Routes: map[string]config.Route{"r": {Kind: "carrier-pigeon"}}}
	_, err := route.Build(c, route.Registry, nil, 1, zerolog.Nop())
	require.ErrorContains(t, err, `unknown provider kind "carrier-pigeon"`)
}

// TestBuildTheGenericExamples builds every shipped provider example as a
// route, as an operator pasting it under routes: would.
func TestBuildTheGenericExamples(t *testing.T) {
	paths, err := filepath.Glob("../../../pkg/provider/generic/examples/*.yaml")
	require.NoError(t, err)
	require.Len(t, paths, 6)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		var r config.Route
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		require.NoError(t, dec.Decode(&r), p)
		t.Setenv(r.TokenEnv, "example-token:example-secret")
		if r.WebhookSecretEnv != "" {
			t.Setenv(r.WebhookSecretEnv, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		}
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		c := &config.Config{Routes: map[string]config.Route{name: r}}
		require.NoError(t, c.Validate(), p)
		routes, err := route.Build(c, route.Registry, nil, 1, zerolog.Nop())
		require.NoError(t, err, p)
		require.Equal(t, "generic", routes[name].Adapter.Info().Kind, p)
	}
}

// The hints of the answer just had reach the schedule: a provider's
// estimate of the time left places the next poll around it, and a
// poll-after hint is a floor, both within max_delay.
func TestAnAnswersHintsReachTheSchedule(t *testing.T) {
	t.Parallel()
	r := &route.Route{Name: "r", Policy: schedule.Policy{MaxDelay: time.Minute}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ps := &events.PollState{State: state.Running, CreatedAt: now.Add(-time.Minute), SubmittedAt: now.Add(-time.Minute), Polls: 3}
	rnd := schedule.NewRand(1)

	sj := r.ScheduleJob(ps, now, route.HintsOf(provider.Status{PollAfter: 3 * time.Second, ETA: 40 * time.Second}), nil)
	require.Equal(t, 3*time.Second, sj.PollAfter)
	require.Equal(t, 40*time.Second, sj.ETA)
	require.Equal(t, 0.5, r.ScheduleJob(ps, now, route.Hints{QueueRate: 0.5}, nil).QueueRate, "the learned queue velocity")

	for range 100 {
		d := r.NextPoll(ps, now, route.Hints{ETA: 40 * time.Second}, nil, rnd)
		require.GreaterOrEqual(t, d, 24*time.Second, "not long before the estimate's window")
		require.LessOrEqual(t, d, 60*time.Second)
		require.LessOrEqual(t, r.NextPoll(ps, now, route.Hints{ETA: 3 * time.Hour}, nil, rnd), time.Minute, "within max_delay")
		require.GreaterOrEqual(t, r.NextPoll(ps, now, route.Hints{PollAfter: 50 * time.Second}, nil, rnd), 50*time.Second, "the hint is a floor")
	}
}

// fakeLearned is a fleet that learned one distribution for every model
// and a webhook miss chance for route "r".
type fakeLearned struct{ total *schedule.Dist }

func (f fakeLearned) Lookup(string, string, string, float64) (total, run *schedule.Dist) {
	return f.total, nil
}
func (fakeLearned) Failures(string, string) (float64, float64) { return 0, 0 }
func (fakeLearned) Webhook(route string) (float64, time.Duration) {
	if route == "r" {
		return 0.1, 2 * time.Second
	}
	return 0, 0
}

// What the fleet learned reaches the schedule: a job's durations, and for
// a job expecting a webhook the route's webhook miss chance and lateness.
func TestWhatTheFleetLearnedReachesTheSchedule(t *testing.T) {
	t.Parallel()
	var d schedule.Dist
	d.Observe(time.Minute)
	r := &route.Route{Name: "r"}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ps := &events.PollState{State: state.Running, SubmittedAt: now, Webhook: true}
	sj := r.ScheduleJob(ps, now, route.Hints{}, fakeLearned{&d})
	require.Same(t, &d, sj.Learned)
	require.Equal(t, 0.1, sj.WebhookMiss)
	require.Equal(t, 2*time.Second, sj.WebhookLate)

	ps.Webhook = false
	sj = r.ScheduleJob(ps, now, route.Hints{}, fakeLearned{&d})
	require.Zero(t, sj.WebhookMiss, "no webhook expected: nothing to miss")
}

// A route's length_from reads a submission's requested output length:
// a number, or a string holding one; anything else is unknown.
func TestLengthFromInput(t *testing.T) {
	t.Parallel()
	r := &route.Route{LengthFrom: "duration"}
	for input, want := range map[string]float64{
		`{"duration":10}`: 10, `{"duration":"5"}`: 5, `{"duration":"5.5 s"}`: 5.5, `{"duration":"5s"}`: 5,
		`{"duration":0}`: 0, `{"duration":-3}`: 0, `{"duration":"ten"}`: 0, `{"duration":1e9}`: 0,
		`{"duration":[5]}`: 0, `{"seconds":5}`: 0, `not json`: 0, `{"duration":null}`: 0,
	} {
		require.Equal(t, want, r.Length(json.RawMessage(input)), input)
	}
	require.Zero(t, (&route.Route{}).Length(json.RawMessage(`{"duration":10}`)), "no length_from: unknown")
}

// A route's settings_from makes a configuration key of a submission's
// input when it gives none, so jobs of one model learn apart per setting.
func TestConfigKeyFromSettings(t *testing.T) {
	t.Parallel()
	r := &route.Route{SettingsFrom: []string{"resolution", "duration"}}
	for _, tt := range []struct {
		given, input, want string
	}{
		{"", `{"resolution":"1080p","duration":10,"prompt":"a cat"}`, "1080p-10"},
		{"", `{"duration":5.5,"resolution":"720p"}`, "720p-5_5"},
		{"", `{"resolution":"16:9 4K"}`, "16_9_4K-_"},
		{"", `{"resolution":{"w":1920},"duration":true}`, "_-true"},
		{"", `{"prompt":"no settings"}`, ""},
		{"", `not json`, ""},
		{"", `{"resolution":"` + strings.Repeat("x", 80) + `"}`, "h"},
		{"given", `{"resolution":"1080p"}`, "given"},
	} {
		got := r.ConfigKey(tt.given, json.RawMessage(tt.input))
		if tt.want == "h" {
			require.Len(t, got, 25, "a long key is hashed")
			require.True(t, strings.HasPrefix(got, "h"))
		} else {
			require.Equal(t, tt.want, got, tt.input)
		}
		require.True(t, got == "" || events.ValidToken(got) && len(got) <= 64, "a key the contract allows: %q", got)
	}
	require.Equal(t, "", (&route.Route{}).ConfigKey("", json.RawMessage(`{"resolution":"1080p"}`)), "no settings_from: no key")
}

// A job's fair-share tenant is its app, unless its route names a
// tenant_key: then the metadata's value is, whatever the app.
func TestTheAppIsTheTenantUnlessTheRouteNamesOne(t *testing.T) {
	t.Parallel()
	j := &state.Job{App: "studio", Metadata: map[string]string{"customer": "acme"}}
	require.Equal(t, "studio", (&route.Route{}).Tenant(j))
	require.Equal(t, events.NoTenant, (&route.Route{}).Tenant(&state.Job{}), "no app: one tenant")
	require.Equal(t, "acme", (&route.Route{TenantKey: "customer"}).Tenant(j))
}
