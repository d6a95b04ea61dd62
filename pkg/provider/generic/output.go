package generic

import (
	"context"
	"io"

	"github.com/pollux-dev/pollux/pkg/provider"
)

var _ provider.OutputOpener = (*Adapter)(nil)

// OpenOutput downloads an output on the API's host with the route's
// credentials (an OpenAI-style /videos/{id}/content is behind the API
// key), dropped on a redirect to another host; an output elsewhere (a
// CDN URL) is left to the plain GET (provider.ErrUnsupported;
// httpapi.Client.Download).
func (a *Adapter) OpenOutput(ctx context.Context, url string) (io.ReadCloser, error) {
	return a.api.Download(ctx, url)
}
