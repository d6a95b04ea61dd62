package face

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/pkg/state"
)

// OutputPath is where a face serves the outputs Pollux keeps, below its
// mount: output n of job id (Kit.ServeOutput), the URL Kit.OutputURL
// gives an app for a kept output (faceshape.OutputURL).
const OutputPath = faceshape.OutputPath

// ProviderURL is output n of job j as the provider gave it, when a face
// may send an app to it (faceshape.ProviderURL); else ErrOutputNotFound.
func ProviderURL(j *state.Job, n int) (string, error) {
	u, ok := faceshape.ProviderURL(j, n)
	if !ok {
		return "", ErrOutputNotFound
	}
	return u, nil
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
	return faceshape.OutputURL(j, k.Base(r), n, k.pollux.KeepsOutputs(j.Route))
}

// KeepsOutputs reports whether route keeps its outputs (Pollux.KeepsOutputs),
// for a face that renders its shape with faceshape.
func (k *Kit) KeepsOutputs(route string) bool { return k.pollux.KeepsOutputs(route) }

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
// when the face may see the job (Job), as Output writes it; a 404 for an
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
	err = k.Output(w, r, j, n)
	if errors.Is(err, ErrOutputNotFound) {
		return &Error{Status: http.StatusNotFound, Code: "output_not_found", Err: err,
			Message: "job " + j.ID + " has no output " + strconv.Quote(raw) + " Pollux can serve"}
	}
	return err
}
