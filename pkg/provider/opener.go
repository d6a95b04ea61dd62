package provider

import (
	"context"
	"io"
)

// OutputOpener is implemented by adapters whose provider serves a job's
// outputs only to its own credentials (an API key on the download, a
// signed fetch). Pollux's output custody opens each output of a succeeded
// job with it when the route's adapter implements it, and otherwise GETs
// the output URL as it is, with no credentials.
//
// The error of an output the provider no longer has must be an *Error of
// Class NotFound (it is recorded as gone and not tried again); one that
// wraps ErrUnsupported says the URL is not the adapter's to open (another
// host than its API's): it is fetched with the plain GET instead; any
// other error is retried with backoff until the outputs expire.
type OutputOpener interface {
	// OpenOutput starts the download of one of a job's output URLs and
	// returns its body, to be read to its end or closed. ctx bounds the
	// whole download.
	OpenOutput(ctx context.Context, url string) (io.ReadCloser, error)
}
