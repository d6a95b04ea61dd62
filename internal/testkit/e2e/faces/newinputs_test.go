package faces_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Image-to-video through the new faces' SDKs, each with a 1.5 MB image
// the way its API takes one inline: @google/genai's imageBytes (base64 in
// instances[0].image.bytesBase64Encoded), Runway's promptImage and Luma's
// keyframes.frame0.url as data: URIs; and Runway's own upload
// (uploads.createEphemeral: a multipart POST to the uploadUrl, then the
// runwayUri as promptImage). The face keeps each image as an
// input file, so the submission carries a reference, not the bytes; the
// simulated provider fetches it from the front door's signed URL and
// gets exactly the app's bytes, once a job.
func TestNewFacesImageInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := startWith(t, fetchingSim, "", nil)
	env := s.sdkEnv("MODE=image", "IMAGE_BYTES=1500000")

	small := func(line map[string]any) {
		t.Helper()
		j := s.record(t, line["id"].(string))
		require.Less(t, len(j.Input), 4096, "the submission names the image by reference: %s", j.Input)
	}

	g := byField("step", node(t, "genai.mjs", 90*time.Second, append(env, "MODEL=acme/video")...))["image"]
	require.NotNil(t, g)
	require.Equal(t, true, g["done"], "%v", g)
	require.Nil(t, g["error"], "%v", g)
	s.requireReceived(t, g, "instances[0].image.bytesBase64Encoded")
	small(g)

	rw := byField("step", node(t, "runway.mjs", 90*time.Second, append(env, "ROUTE=video")...))["image"]
	require.NotNil(t, rw)
	require.Equal(t, "SUCCEEDED", rw["status"], "%v", rw)
	s.requireReceived(t, rw, "promptImage")
	small(rw)

	up := byField("step", node(t, "runway.mjs", 90*time.Second, append(env, "ROUTE=video", "MODE=upload")...))["upload"]
	require.NotNil(t, up)
	require.Equal(t, "SUCCEEDED", up["status"], "%v", up)
	require.Regexp(t, `^runway://pollux/`, up["uri"])
	s.requireReceived(t, up, "promptImage")
	small(up)

	l := byField("step", node(t, "luma.mjs", 90*time.Second, append(env, "ROUTE=video")...))["image"]
	require.NotNil(t, l)
	require.Equal(t, "completed", l["state"], "%v", l)
	s.requireReceived(t, l, "keyframes.frame0.url")
	small(l)

	require.Equal(t, 4, s.simInputs(t).Fetches, "one fetch a job")
}
