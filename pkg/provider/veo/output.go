package veo

import (
	"context"
	"io"

	"github.com/pollux-dev/pollux/pkg/provider"
)

var _ provider.OutputOpener = (*Adapter)(nil)

// OpenOutput downloads a generated video: a Gemini Files API URI needs the
// API key, sent in the x-goog-api-key header on the API's host, and
// dropped on a redirect to another (the storage Google sends a download
// to); an output on another host is left to the plain GET
// (provider.ErrUnsupported; httpapi.Client.Download). A 404 or 410 is a
// NotFound *provider.Error: the video is gone.
func (a *Adapter) OpenOutput(ctx context.Context, url string) (io.ReadCloser, error) {
	return a.api.Download(ctx, url)
}
