package safehttp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/safehttp"
)

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url          string
		allowPrivate bool
		bad          string // "" when accepted
	}{
		{"https://app.example/hook", false, ""},
		{"https://203.0.113.7:8443/hook", false, ""},
		{"http://app.example/hook", false, "want https"},
		{"http://app.example/hook", true, "want https"},
		{"ftp://app.example/hook", false, "scheme"},
		{"https://user:pw@app.example/hook", false, "credentials"},
		{"https:///hook", false, "no host"},
		{"/hook", false, "scheme"},
		{"https://10.0.0.5/hook", false, "private"},
		{"https://10.0.0.5/hook", true, ""},
		{"https://169.254.169.254/latest", false, "link-local"},
		{"https://[::ffff:192.168.1.1]/hook", false, "private"},
		{"http://127.0.0.1:9000/hook", false, "loopback"},
		{"http://127.0.0.1:9000/hook", true, ""},
		{"http://localhost:9000/hook", true, ""},
		{"http://localhost:9000/hook", false, "loopback"},
		{"http://[::1]:9000/hook", true, ""},
		{"https://app.example/" + string(make([]byte, safehttp.MaxURLLen)), false, "longer than"},
	} {
		err := safehttp.CheckURL(c.url, c.allowPrivate)
		if c.bad == "" {
			require.NoError(t, err, c.url)
		} else {
			require.ErrorContains(t, err, c.bad, c.url)
		}
	}
}
