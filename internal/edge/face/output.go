package face

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/pollux-dev/pollux/pkg/state"
)

// OutputPath is where a face serves the outputs Pollux keeps, below its
// mount: output n of job id (Kit.ServeOutput), the URL Kit.OutputURL
// gives an app for a kept output.
const OutputPath = "/outputs/{id}/{n}"

// ProviderURL is output n of job j as the provider gave it, when it is a
// URL a face may send an app to: http or https, with a host and no
// userinfo; else (or when the job has no output n) ErrOutputNotFound. The
// record holds what the provider said, which is not to be trusted as a
// link or a redirect target.
func ProviderURL(j *state.Job, n int) (string, error) {
	if n < 0 || n >= len(j.Outputs) {
		return "", ErrOutputNotFound
	}
	u, err := url.Parse(j.Outputs[n])
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", ErrOutputNotFound
	}
	return u.String(), nil
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

// OutputURL is output n of job j as a face gives it to the app that made
// request r, and the one way a face does:
//
//   - when Pollux keeps the output (Kept), Pollux's own URL on the face,
//     Base(r) + "/outputs/{id}/{n}": it lives as long as Pollux keeps the
//     bytes, not as long as the provider does (an hour for a Replicate
//     API prediction), and takes the app's token as every request to the
//     face does;
//   - otherwise the provider's URL, when it is safe (ProviderURL);
//   - otherwise none (false): an output URL the record holds that is not
//     http(s) — a javascript: or file: URL, userinfo — is never handed on.
func (k *Kit) OutputURL(r *http.Request, j *state.Job, n int) (string, bool) {
	if Kept(j, n, k.pollux.KeepsOutputs(j.Route)) {
		return k.Base(r) + "/outputs/" + url.PathEscape(j.ID) + "/" + strconv.Itoa(n), true
	}
	u, err := ProviderURL(j, n)
	return u, err == nil
}

// OutputURLs are job j's output URLs as OutputURL gives them, in order,
// leaving out those it gives none for.
func (k *Kit) OutputURLs(r *http.Request, j *state.Job) []string {
	var outs []string
	for n := range j.Outputs {
		if u, ok := k.OutputURL(r, j, n); ok {
			outs = append(outs, u)
		}
	}
	return outs
}

// ServeOutput serves OutputPath: output n of the job the path names,
// when the face may see the job (Job) — the bytes output custody kept,
// else a redirect to the provider's URL (Pollux.Output); a 404 for an
// output the job does not have, or none Pollux can serve.
func (k *Kit) ServeOutput(w http.ResponseWriter, r *http.Request) error {
	j, err := k.Job(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	raw := r.PathValue("n")
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 || strconv.Itoa(n) != raw {
		n = -1
	}
	err = k.pollux.Output(w, r, j, n)
	if errors.Is(err, ErrOutputNotFound) {
		return &Error{Status: http.StatusNotFound, Code: "output_not_found", Err: err,
			Message: "job " + j.ID + " has no output " + strconv.Quote(raw) + " Pollux can serve"}
	}
	return err
}
