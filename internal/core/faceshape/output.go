package faceshape

import (
	"net/url"
	"strconv"

	"github.com/pollux-dev/pollux/pkg/state"
)

// OutputPath is where a face serves the outputs Pollux keeps, below its
// mount: output n of job id.
const OutputPath = "/outputs/{id}/{n}"

// ProviderURL is output n of job j as the provider gave it, when it is a
// URL a face may send an app to: http or https, with a host and no
// userinfo; else (or when the job has no output n) false. The
// record holds what the provider said, which is not to be trusted as a
// link or a redirect target.
func ProviderURL(j *state.Job, n int) (string, bool) {
	if n < 0 || n >= len(j.Outputs) {
		return "", false
	}
	u, err := url.Parse(j.Outputs[n])
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", false
	}
	return u.String(), true
}

// Saved reports whether output custody saved output n of job j: Pollux
// holds its bytes.
func Saved(j *state.Job, n int) bool {
	c := j.Custody
	return c != nil && !c.SavedAt.IsZero() && n >= 0 && n < len(c.Outputs) && c.Outputs[n].Status == state.OutputSaved
}

// Kept reports whether output n of succeeded job j is Pollux's to serve:
// custody saved it, or has yet to copy it on a route that keeps outputs
// (routeKeeps) — Pollux serves the provider's URL meanwhile. An output
// custody recorded as not kept (gone, too large, failed) is not.
func Kept(j *state.Job, n int, routeKeeps bool) bool {
	switch {
	case j.State != state.Succeeded || n < 0 || n >= len(j.Outputs):
		return false
	case Saved(j, n):
		return true
	case j.Custody != nil && !j.Custody.SavedAt.IsZero():
		return false // custody has decided: not kept
	}
	return routeKeeps
}

// OutputURL is output n of job j as a face gives it to an app, base being
// the face's absolute URL (scheme, host, mount prefix) and routeKeeps the
// route's keep_outputs: Pollux's own URL, base + "/outputs/{id}/{n}",
// when Pollux keeps it (Kept); else the provider's when safe
// (ProviderURL); else none (false).
func OutputURL(j *state.Job, base string, n int, routeKeeps bool) (string, bool) {
	if Kept(j, n, routeKeeps) {
		return base + "/outputs/" + url.PathEscape(j.ID) + "/" + strconv.Itoa(n), true
	}
	return ProviderURL(j, n)
}
