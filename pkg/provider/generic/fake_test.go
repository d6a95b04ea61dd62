package generic_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/generic"
)

// reply is one canned answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

type recorded struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// fake is an httptest server answering by "METHOD /path" from a table
// ("*" for anything else) and recording what it saw; an unlisted request
// gets a 500. The table may be changed between calls with set.
type fake struct {
	*httptest.Server
	mu       sync.Mutex
	table    map[string]reply
	requests []*recorded
}

func newFake(t *testing.T, table map[string]reply) *fake {
	t.Helper()
	f := &fake{table: table}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, &recorded{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		rep, ok := f.table[r.Method+" "+r.URL.Path]
		if !ok {
			rep, ok = f.table["*"]
		}
		f.mu.Unlock()
		if !ok {
			rep = reply{status: 500, body: []byte(`{"error":"unexpected request"}`)}
		}
		for k, v := range rep.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rep.status)
		_, _ = w.Write(rep.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) set(key string, r reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.table[key] = r
}

func (f *fake) all() []*recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*recorded(nil), f.requests...)
}

func (f *fake) last() *recorded {
	all := f.all()
	return all[len(all)-1]
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

func ok(t testing.TB, name string) reply { return reply{status: 200, body: fixture(t, name)} }

// example is an example route fragment: the part of a Pollux route the
// adapter reads.
type example struct {
	Kind             string         `yaml:"kind"`
	TokenEnv         string         `yaml:"token_env"`
	WebhookSecretEnv string         `yaml:"webhook_secret_env"`
	Options          map[string]any `yaml:"options"`
}

// loadExample reads examples/<name>.yaml strictly and returns its options as
// the JSON Pollux's config hands to adapters.
func loadExample(t testing.TB, name string) json.RawMessage {
	t.Helper()
	f, err := os.Open("examples/" + name + ".yaml")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var ex example
	require.NoError(t, dec.Decode(&ex))
	require.Equal(t, generic.Kind, ex.Kind)
	require.NotEmpty(t, ex.TokenEnv, "the example names where its token comes from")
	opts, err := json.Marshal(ex.Options)
	require.NoError(t, err)
	return opts
}

// exampleAdapter builds the example's adapter pointed at the fake: the
// example's base_url with the fake's scheme and host, its path kept.
func exampleAdapter(t *testing.T, name string, f *fake, token string) *generic.Adapter {
	t.Helper()
	opts := loadExample(t, name)
	var o struct {
		BaseURL string `json:"base_url"`
	}
	require.NoError(t, json.Unmarshal(opts, &o))
	base, err := url.Parse(o.BaseURL)
	require.NoError(t, err)
	a, err := generic.NewAdapter(provider.Config{Route: name, Kind: generic.Kind, BaseURL: f.URL + base.Path, Token: token, Options: opts})
	require.NoError(t, err)
	return a
}
