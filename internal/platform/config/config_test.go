package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
)

const example = `
prefix: acme
nats:
  url: nats://127.0.0.1:4222
streams:
  replicas: 3
  events_max_age: 48h
routes:
  replicate:
    kind: replicate
    token_env: TEST_POLLUX_TOKEN
    webhook_url: https://hooks.example.com/webhooks/replicate
    deadline: 30m
    max_deadline: 6h
    workers: {submit: 2, status: 8}
    poll: {max_delay: 45s, jitter: 0.1}
    options: {webhook_events: [completed]}
`

func TestParse(t *testing.T) {
	c, err := config.Parse(strings.NewReader(example))
	require.NoError(t, err)
	require.Equal(t, "acme", c.Prefix)
	require.Equal(t, 3, c.Streams.Options().Replicas)
	require.Equal(t, 48*time.Hour, c.Streams.Options().EventsMaxAge)
	r := c.Routes["replicate"]
	require.Equal(t, 30*time.Minute, r.Deadline)
	require.Equal(t, 45*time.Second, r.Poll.MaxDelay)
	opts, err := r.OptionsJSON()
	require.NoError(t, err)
	require.JSONEq(t, `{"webhook_events":["completed"]}`, string(opts))

	t.Setenv("TEST_POLLUX_TOKEN", " r8_secret \n")
	tok, err := r.Token()
	require.NoError(t, err)
	require.Equal(t, "r8_secret", tok)
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"unknown field", "routes: {r: {kind: replicate, tokn_env: X}}", "tokn_env"},
		{"no routes", "prefix: p", "routes: at least one"},
		{"bad prefix", "prefix: a.b\nroutes: {r: {kind: replicate}}", "prefix"},
		{"bad route name", "routes: {'a b': {kind: replicate}}", "routes.a b"},
		{"no kind", "routes: {r: {}}", "routes.r.kind: required"},
		{"two token sources", "routes: {r: {kind: replicate, token_env: A, token_file: B}}", "token_env"},
		{"deadline past max", "routes: {r: {kind: replicate, deadline: 2h, max_deadline: 1h}}", "deadline"},
		{"jitter", "routes: {r: {kind: replicate, poll: {jitter: 1.5}}}", "poll.jitter"},
		{"webhook url", "routes: {r: {kind: replicate, webhook_url: 'ftp://x'}}", "webhook_url"},
		{"replicas", "streams: {replicas: 7}\nroutes: {r: {kind: replicate}}", "streams.replicas"},
		{"not yaml", "{{{", "yaml"},
		{"empty setting", "routes: {r: {kind: replicate, settings_from: [resolution, '']}}", "settings_from: each field name"},
		{"many settings", "routes: {r: {kind: replicate, settings_from: [a, b, c, d, e, f, g, h, i]}}", "settings_from: 9 fields"},
		{"long length_from", "routes: {r: {kind: replicate, length_from: " + strings.Repeat("x", 65) + "}}", "length_from"},
		{"one member", "routes: {a: {kind: replicate}}\nmodel_routes: {m: {members: [{route: a, model: x}]}}", "model_routes.m.members: a model route needs at least 2"},
		{"unknown member", "routes: {a: {kind: replicate}}\nmodel_routes: {m: {members: [{route: a, model: x}, {route: b, model: y}]}}", "members[1].route: no route named \"b\""},
		{"member twice", "routes: {a: {kind: replicate}}\nmodel_routes: {m: {members: [{route: a, model: x}, {route: a, model: y}]}}", "is a member twice"},
		{"member without model", "routes: {a: {kind: replicate}, b: {kind: fal}}\nmodel_routes: {m: {members: [{route: a, model: x}, {route: b}]}}", "members[1].model"},
		{"model route named as a route", "routes: {a: {kind: replicate}, b: {kind: fal}}\nmodel_routes: {a: {members: [{route: a, model: x}, {route: b, model: y}]}}", "model_routes.a: a route has that name too"},
		{"explore", "routes: {a: {kind: replicate}, b: {kind: fal}}\nmodel_routes: {m: {explore: 0.9, members: [{route: a, model: x}, {route: b, model: y}]}}", "explore: 0.9"},
		{"notify: no secret", "routes: {a: {kind: replicate}}\nnotify: {endpoints: {app: {url: 'https://app.example/hook'}}}", "notify.endpoints.app.secrets_env: at least one"},
		{"notify: bad url", "routes: {a: {kind: replicate}}\nnotify: {endpoints: {app: {url: 'ftp://app.example/hook', secrets_env: [S]}}}", "notify.endpoints.app.url: scheme \"ftp\""},
		{"notify: credentials", "routes: {a: {kind: replicate}}\nnotify: {endpoints: {app: {url: 'https://u:p@app.example/', secrets_env: [S]}}}", "credentials in the URL"},
		{"notify: events", "routes: {a: {kind: replicate}}\nnotify: {endpoints: {app: {url: 'https://app.example/', secrets_env: [S], events: some}}}", "events: \"some\""},
		{"notify: reserved name", "routes: {a: {kind: replicate}}\nnotify: {endpoints: {submission: {url: 'https://app.example/', secrets_env: [S]}}}", "and not \"submission\""},
		{"notify: submissions url", "routes: {a: {kind: replicate}}\nnotify: {submissions: {url: 'https://app.example/', secrets_env: [S]}}", "notify.submissions.url: each submission gives its own"},
		{"notify: unknown endpoint", "routes: {a: {kind: replicate, notify: [app]}}", "routes.a.notify: no endpoint named \"app\""},
		{"keep_outputs: max_bytes", "routes: {a: {kind: replicate, keep_outputs: {max_bytes: -1}}}", "routes.a.keep_outputs.max_bytes: must not be negative"},
		{"keep_outputs: timeout", "routes: {a: {kind: replicate, keep_outputs: {timeout: -1s}}}", "routes.a.keep_outputs.timeout"},
		{"keep_outputs: unknown field", "routes: {a: {kind: replicate, keep_outputs: {max_size: 1}}}", "max_size"},
		{"custody: lead", "routes: {a: {kind: replicate}}\ncustody: {expiring_lead: -1h}", "custody.expiring_lead: must not be negative"},
		{"hedge_below", "routes: {a: {kind: replicate}, b: {kind: fal}}\nmodel_routes: {m: {hedge: true, hedge_below: 2, members: [{route: a, model: x}, {route: b, model: y}]}}", "hedge_below: 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse(strings.NewReader(tt.yaml))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(path, []byte("from-file\n"), 0o600))
	tok, err := config.Route{TokenFile: path}.Token()
	require.NoError(t, err)
	require.Equal(t, "from-file", tok)

	_, err = config.Route{TokenEnv: "TEST_POLLUX_UNSET_VAR"}.Token()
	require.ErrorContains(t, err, "TEST_POLLUX_UNSET_VAR is not set")

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = config.Route{TokenFile: empty}.Token()
	require.ErrorContains(t, err, "empty")

	none, err := config.Route{}.WebhookSecret()
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestLoadTheShippedExample(t *testing.T) {
	t.Setenv("REPLICATE_API_TOKEN", "r8_example")
	c, err := config.Load("../../../deploy/pollux.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, c.Routes)
}

func TestBudgets(t *testing.T) {
	t.Parallel()
	c, err := config.Parse(strings.NewReader(`
routes:
  r:
    kind: replicate
    budgets:
      submit: {concurrency: 2, rate: 600/min}
      status: {rate: "20/s", lease_wait: 15s}
`))
	require.NoError(t, err)
	b := c.Routes["r"].Budgets
	require.Equal(t, 2, b.Submit.Concurrency)
	require.InDelta(t, 10, float64(b.Submit.Rate), 1e-9)
	require.InDelta(t, 20, float64(b.Status.Rate), 1e-9)
	require.Equal(t, 15*time.Second, b.Status.LeaseWait)

	for in, want := range map[string]float64{"5": 5, "3000/min": 50, "7200/h": 2, "0.5/s": 0.5} {
		r, err := config.ParseRate(in)
		require.NoError(t, err, in)
		require.InDelta(t, want, float64(r), 1e-9, in)
	}
	for _, bad := range []string{"fast", "10/day", "-1/s", "NaN"} {
		_, err := config.ParseRate(bad)
		require.Error(t, err, bad)
	}
	_, err = config.Parse(strings.NewReader("routes: {r: {kind: replicate, budgets: {status: {rate: lots}}}}"))
	require.ErrorContains(t, err, "rate")
}

func TestNATSAuth(t *testing.T) {
	t.Parallel()
	ok := []string{
		"nats: {creds_file: /etc/pollux.creds}",
		"nats: {nkey_file: /etc/pollux.nk}",
		"nats: {user: pollux, password_env: PW}",
		"nats: {token_file: /run/secrets/nats}",
		"nats: {tls: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem}, user: u, password_file: pw}",
	}
	for _, y := range ok {
		_, err := config.Parse(strings.NewReader(y + "\nroutes: {r: {kind: replicate}}"))
		require.NoError(t, err, y)
	}
	bad := map[string]string{
		"nats: {creds_file: a, user: b}":           "give one of",
		"nats: {password_env: PW}":                 "user: required",
		"nats: {tls: {cert_file: c.pem}}":          "cert_file and key_file",
		"nats: {token_env: A, token_file: B}":      "token_env",
		"nats: {user: u, password: inline-secret}": "password",
	}
	for y, want := range bad {
		_, err := config.Parse(strings.NewReader(y + "\nroutes: {r: {kind: replicate}}"))
		require.ErrorContains(t, err, want, y)
	}
}

func TestBudgetLevels(t *testing.T) {
	c, err := config.Parse(strings.NewReader(`
budgets: {submit: {rate: 50/s}, running: 100}
accounts:
  runway-main:
    budgets: {submit: {rate: 5/s}, status: {concurrency: 8}, running: 5}
routes:
  gen4: {kind: runway, account: runway-main, budgets: {running: 3}}
  turbo: {kind: runway, account: runway-main}
`))
	require.NoError(t, err)
	require.Equal(t, 100, c.Budgets.Running)
	require.Equal(t, 5, c.Accounts["runway-main"].Budgets.Running)
	require.Equal(t, config.Rate(5), c.Accounts["runway-main"].Budgets.Submit.Rate)
	require.Equal(t, "runway-main", c.Routes["turbo"].Account)

	for conf, problem := range map[string]string{
		"routes: {r: {kind: x, account: nope}}":                                         `routes.r.account: no account named "nope" under accounts`,
		"accounts: {a: {budgets: {running: -1}}}\nroutes: {r: {kind: x}}":               "accounts.a.budgets: running must not be negative",
		"budgets: {running: 200000}\nroutes: {r: {kind: x}}":                            "budgets: running above 100000 is no limit",
		"accounts: {'a.b': {}}\nroutes: {r: {kind: x}}":                                 "accounts.a.b: an account name must be",
		"running_repair: {grace: 1s}\nroutes: {r: {kind: x}}":                           "running_repair.grace: 1s is too short",
		"streams: {park_after: 5s}\nroutes: {r: {kind: x}}":                             "streams.park_after: 5s is too short",
		"routes: {r: {kind: x, budgets: {status: {concurrency: -2}}}}":                  "routes.r.budgets: concurrency must not be negative",
		"accounts: {a: {budgets: {submit: {lease_wait: -1s}}}}\nroutes: {r: {kind: x}}": "accounts.a.budgets: lease_wait must not be negative",
	} {
		_, err := config.Parse(strings.NewReader(conf))
		require.ErrorContains(t, err, problem, conf)
	}
}

// A route keeps its outputs only when it says so, with the defaults
// filled where it gives none; the custody worker runs then.
func TestKeepOutputs(t *testing.T) {
	t.Parallel()
	c, err := config.Parse(strings.NewReader("routes: {a: {kind: replicate, keep_outputs: {max_bytes: 1048576}}, b: {kind: replicate}}"))
	require.NoError(t, err)
	require.Nil(t, c.Routes["b"].KeepOutputs)
	k := c.Routes["a"].KeepOutputs.WithDefaults()
	require.Equal(t, config.KeepOutputs{MaxBytes: 1 << 20, Timeout: config.DefaultKeepTimeout, Horizon: config.DefaultKeepHorizon}, k)
	require.True(t, c.CustodyEnabled())
	c, err = config.Parse(strings.NewReader("routes: {b: {kind: replicate}}"))
	require.NoError(t, err)
	require.False(t, c.CustodyEnabled())
}
