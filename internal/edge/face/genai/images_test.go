package genai_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// An inline image of 64 KiB or more (bytesBase64Encoded, the SDK's
// imageBytes) is kept as an input file of the caller's and the submission
// names it by reference, its mimeType kept; a smaller one stays inline;
// with no input store a large one stays inline too.
func TestLargeImagesAreKept(t *testing.T) {
	t.Parallel()
	r := setup(t)
	img := bytes.Repeat([]byte("png!"), face.MinInlineData/2)
	b64 := base64.StdEncoding.EncodeToString(img)
	body := func(image string) string {
		return `{"instances":[{"prompt":"p","image":{"bytesBase64Encoded":"` + image + `","mimeType":"image/png"},"lastFrame":{"bytesBase64Encoded":"iVBORw0K","mimeType":"image/png"}}]}`
	}
	create := func() events.Submit {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/v1beta/models/veo-3:predictLongRunning", strings.NewReader(body(b64)))
		req.Header.Set("Authorization", "app") // the caller facetest keeps files of
		rec := httptest.NewRecorder()
		r.h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		subs := r.p.Submissions()
		return subs[len(subs)-1]
	}
	require.JSONEq(t, body(b64), string(create().Input), "no store: inline as sent")

	_, js := natstest.Connect(t, natstest.Server(t))
	store, err := inputs.Open(context.Background(), js, events.Default, inputs.Config{})
	require.NoError(t, err)
	r.p.KeepFiles(store)
	s := create()
	require.Less(t, len(s.Input), 1024, "the submission names the image: %s", s.Input)
	var in struct {
		Instances []struct {
			Image     map[string]string `json:"image"`
			LastFrame map[string]string `json:"lastFrame"`
		} `json:"instances"`
	}
	require.NoError(t, json.Unmarshal(s.Input, &in))
	require.Equal(t, "iVBORw0K", in.Instances[0].LastFrame["bytesBase64Encoded"], "a small image stays inline")
	require.Equal(t, "image/png", in.Instances[0].Image["mimeType"])
	id, ok := inputs.ParseRef(in.Instances[0].Image["bytesBase64Encoded"])
	require.True(t, ok, "%v", in.Instances[0].Image)
	f, rc, err := store.Open(t.Context(), id)
	require.NoError(t, err)
	defer rc.Close()
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.Equal(t, img, got, "the app's bytes")
	require.Equal(t, "image/png", f.ContentType)
}
