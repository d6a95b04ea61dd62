package e2etest

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// SimFleetConfig is a fleet of real processes against a simulated
// provider (or several), for StartSimFleet.
type SimFleetConfig struct {
	// Sim is the simulated provider's YAML configuration.
	Sim string
	// Sims, when set, are the simulated providers instead of Sim: each
	// YAML configuration by its provider's name (a route each, say).
	Sims map[string]string
	// Config is the services' pollux.yaml, in which {{sim}} stands for
	// the simulated provider's host:port ({{sim.NAME}} for provider NAME
	// of Sims) and {{webhook}} for the webhook receiver's (a route
	// reaches the provider at http://{{sim}}).
	Config string
	// Token is the providers' API token, in the environment as TokenEnv.
	Token string
	// TokenEnv is the variable that holds Token, which the routes'
	// token_env name; default SIM_TOKEN.
	TokenEnv string
	// TimeScale is the services' POLLUX_TIME_SCALE; 0 leaves it unset
	// (real time).
	TimeScale int
	// Env is more environment for the provider and every service.
	Env []string
	// NATS, when set, is the URL each service connects with, to servers
	// the test started itself (a cluster, a user per service), which JS
	// reaches. When nil, StartSimFleet starts a nats-server process.
	NATS func(service string) string
	// JS reaches the servers NATS names; only with NATS.
	JS jetstream.JetStream
}

// SimFleet is the provider and the setup a fleet's services share; the
// test launches the services it wants with Launch.
type SimFleet struct {
	// Bin is the directory of the binaries (Binaries).
	Bin string
	// Dir is the test's directory: the NATS store, the configurations.
	Dir string
	// NATSURL is the nats-server's URL; empty with SimFleetConfig.NATS.
	NATSURL string
	// JS reaches the NATS servers.
	JS jetstream.JetStream
	// SimAddr is the simulated provider's host:port, SimURL its base URL
	// (empty with SimFleetConfig.Sims).
	SimAddr, SimURL string
	// HookAddr is the host:port the webhook receiver listens on.
	HookAddr string
	// Sim is the simulated provider's process (nil with
	// SimFleetConfig.Sims).
	Sim *Proc
	// Sims are the simulated providers of SimFleetConfig.Sims, by name.
	Sims map[string]SimProvider
	// ConfigPath is the services' pollux.yaml (SimFleetConfig.Config).
	ConfigPath string
	// Env is every service's environment: the token, SimFleetConfig.Env,
	// the configuration, the time scale, the webhook address, no metrics
	// endpoint, and the NATS URL unless SimFleetConfig.NATS gives one per
	// service (Launch adds it).
	Env []string

	t       *testing.T
	natsURL func(service string) string
	// placeholders are Config's, each with what it stands for.
	placeholders []string
}

// SimProvider is one of the simulated providers of a fleet.
type SimProvider struct {
	// Proc is its process.
	Proc *Proc
	// Addr is its host:port, URL its base URL.
	Addr, URL string
}

// StartSimFleet builds the binaries, starts NATS (unless cfg.NATS names
// servers), starts the simulated provider (or cfg.Sims) and writes the
// services' configuration. Everything it starts stops when the test ends.
func StartSimFleet(t *testing.T, cfg SimFleetConfig) *SimFleet {
	t.Helper()
	f := &SimFleet{Bin: Binaries(t), Dir: t.TempDir(), JS: cfg.JS, t: t, natsURL: cfg.NATS}
	if f.natsURL == nil {
		f.NATSURL, f.JS = NATSProcess(t, f.Bin, f.Dir)
		f.natsURL = func(string) string { return f.NATSURL }
	}
	require.NotNil(t, f.JS, "SimFleetConfig.JS reaches the servers SimFleetConfig.NATS names")
	tokenEnv := cmp.Or(cfg.TokenEnv, "SIM_TOKEN")
	env := append([]string{tokenEnv + "=" + cfg.Token}, cfg.Env...)
	if cfg.Sims == nil {
		f.Sim, f.SimAddr = SimProcess(t, f.Bin, f.Dir, "sim", cfg.Sim, env, tokenEnv)
		f.SimURL = "http://" + f.SimAddr
		f.placeholders = []string{"{{sim}}", f.SimAddr}
	} else {
		require.Empty(t, cfg.Sim, "SimFleetConfig: Sim or Sims, not both")
		f.Sims = map[string]SimProvider{}
		for name, conf := range cfg.Sims {
			p, addr := SimProcess(t, f.Bin, f.Dir, "sim-"+name, conf, env, tokenEnv)
			f.Sims[name] = SimProvider{Proc: p, Addr: addr, URL: "http://" + addr}
			f.placeholders = append(f.placeholders, "{{sim."+name+"}}", addr)
		}
	}
	f.HookAddr = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	f.placeholders = append(f.placeholders, "{{webhook}}", f.HookAddr)
	f.ConfigPath = f.WriteConfig("pollux.yaml", cfg.Config)
	f.Env = append(slices.Clip(env), "POLLUX_CONFIG="+f.ConfigPath, "POLLUX_METRICS_ADDR=", "POLLUX_WEBHOOK_ADDR="+f.HookAddr)
	if cfg.TimeScale != 0 {
		f.Env = append(f.Env, fmt.Sprintf("POLLUX_TIME_SCALE=%d", cfg.TimeScale))
	}
	if f.NATSURL != "" {
		f.Env = append(f.Env, "POLLUX_NATS_URL="+f.NATSURL)
	}
	return f
}

// Launch starts service (ingest, poller, webhook) as a process named
// name, with Env, its NATS URL, and env, whose variables replace Env's
// of the same name. It stops when the test ends (see the package's
// Launch).
func (f *SimFleet) Launch(name, service string, env ...string) *Proc {
	f.t.Helper()
	all := slices.Concat(f.Env, []string{"POLLUX_NATS_URL=" + f.natsURL(service)}, env)
	return Launch(f.t, name, all, filepath.Join(f.Bin, service))
}

// WriteConfig writes conf, a configuration with SimFleetConfig.Config's
// placeholders, to the file name in Dir, and returns its path: a second
// configuration for some of the services (POLLUX_CONFIG in Launch's env),
// or a changed one.
func (f *SimFleet) WriteConfig(name, conf string) string {
	f.t.Helper()
	path := filepath.Join(f.Dir, name)
	conf = strings.NewReplacer(f.placeholders...).Replace(conf)
	require.NotContains(f.t, conf, "{{", "%s: a placeholder of no provider, or other than {{webhook}}", name)
	require.NoError(f.t, os.WriteFile(path, []byte(conf), 0o600))
	return path
}
