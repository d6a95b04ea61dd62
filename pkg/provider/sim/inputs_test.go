package sim_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// With FetchInputs the sim takes each input file as a provider does —
// a URL fetched, a data: URI decoded — and records its SHA-256 once per
// prediction: a create replayed by its Idempotency-Key fetches nothing;
// a URL that cannot be fetched refuses the create.
func TestTheSimReceivesInputFiles(t *testing.T) {
	t.Parallel()
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 100_000)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/img.png" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(img)
	}))
	t.Cleanup(files.Close)
	s, err := sim.New(sim.Config{FetchInputs: true, TimeScale: 100})
	require.NoError(t, err)
	api := httptest.NewServer(s.Handler())
	t.Cleanup(api.Close)

	small := []byte("tiny")
	body := `{"version":"v1","input":{"image":"` + files.URL + `/img.png","masks":["data:image/png;base64,` + base64.StdEncoding.EncodeToString(small) + `"],"prompt":"a cat"}}`
	create := func(body, key string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, api.URL+"/v1/predictions", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusCreated, create(body, "k1"))
	require.Equal(t, http.StatusCreated, create(body, "k1"), "a replay")
	got := s.InputFiles()
	require.Equal(t, 1, got.Fetches, "the replay fetched nothing")
	require.Len(t, got.Files, 2)
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	require.Equal(t, sim.InputFile{Prediction: got.Files[0].Prediction, Field: "image", Via: "url", Size: int64(len(img)), SHA256: sum(img)}, got.Files[0])
	require.Equal(t, sim.InputFile{Prediction: got.Files[0].Prediction, Field: "masks[0]", Via: "data", Size: 4, SHA256: sum(small)}, got.Files[1])

	require.Equal(t, http.StatusUnprocessableEntity, create(`{"version":"v1","input":{"image":"`+files.URL+`/gone.png"}}`, ""))
	require.Len(t, s.InputFiles().Files, 2, "the refused create made nothing")
}
