package webhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/problem"
)

// Every error the receiver answers, a wrong path or method too, is the
// front door's problem body — not net/http's plain-text page.
func TestEveryErrorHasTheFrontDoorsBody(t *testing.T) {
	t.Parallel()
	r := start(t)
	for _, tc := range []struct {
		method, path string
		status       int
		code         problem.Code
		allow        string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, problem.CodeNotFound, ""},
		{http.MethodPost, "/webhooks/", http.StatusNotFound, problem.CodeNotFound, ""},
		{http.MethodPost, "/webhooks/rep/extra", http.StatusNotFound, problem.CodeNotFound, ""},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, problem.CodeMethodNotAllowed, http.MethodGet},
		{http.MethodGet, "/webhooks/rep", http.StatusMethodNotAllowed, problem.CodeMethodNotAllowed, http.MethodPost},
	} {
		req, err := http.NewRequest(tc.method, r.url+tc.path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var raw bytes.Buffer
		_, err = raw.ReadFrom(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, tc.status, resp.StatusCode, "%s %s", tc.method, tc.path)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s %s: %s", tc.method, tc.path, raw.String())
		require.Equal(t, tc.allow, resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
		dec := json.NewDecoder(&raw)
		dec.DisallowUnknownFields()
		var body problem.Body
		require.NoError(t, dec.Decode(&body), "%s %s", tc.method, tc.path)
		require.Equal(t, tc.code, body.Error.Code, "%s %s", tc.method, tc.path)
		require.NotEmpty(t, body.Error.Message)
	}
}
