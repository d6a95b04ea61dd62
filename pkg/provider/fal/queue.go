package fal

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
)

// queueURLs are a request's URLs, as fal returns them at submit and as the
// job keeps them in its RefData.
type queueURLs struct {
	StatusURL   string `json:"status_url"`
	ResponseURL string `json:"response_url"`
	CancelURL   string `json:"cancel_url"`
}

// urls returns the request's URLs: the stored ones when they pass the
// queue-host check, else those of the documented pattern, built from the
// model's owner/app.
func (a *Adapter) urls(ref provider.Ref) (queueURLs, error) {
	if err := checkID(ref.ID); err != nil {
		return queueURLs{}, err
	}
	if len(ref.Data) > 0 {
		var u queueURLs
		if json.Unmarshal(ref.Data, &u) == nil &&
			a.onQueue(u.StatusURL, ref.ID) && a.onQueue(u.ResponseURL, ref.ID) && a.onQueue(u.CancelURL, ref.ID) {
			return u, nil
		}
		a.log.Warn().Str(logkey.RemoteID, ref.ID).Msg("stored fal queue URLs fail the queue-host check; using the documented URL pattern")
	}
	app, err := appOf(ref.Model)
	if err != nil {
		return queueURLs{}, err
	}
	r := a.base.String() + "/" + app + "/requests/" + ref.ID
	return queueURLs{StatusURL: r + "/status", ResponseURL: r, CancelURL: r + "/cancel"}, nil
}

// onQueue reports whether raw is a URL Pollux may call for request id: the
// configured queue host's scheme and host (port included), a path under the
// base path naming the request, no credentials, query or fragment, and no
// dot segments.
func (a *Adapter) onQueue(raw, id string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != a.base.Scheme || u.Host != a.base.Host || u.User != nil ||
		u.Opaque != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawPath != "" {
		return false
	}
	if !strings.HasPrefix(u.Path, a.base.Path+"/") {
		return false
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	i := strings.Index(u.Path, "/requests/"+id)
	if i < 0 {
		return false
	}
	rest := u.Path[i+len("/requests/")+len(id):]
	return rest == "" || strings.HasPrefix(rest, "/")
}

var segmentRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// appOf returns the owner/app of a model id "owner/app[/subpath...]".
func appOf(model string) (string, error) {
	segs := strings.Split(model, "/")
	if len(segs) < 2 || len(segs) > 8 {
		return "", invalidModel(model)
	}
	for _, s := range segs {
		if !segmentRe.MatchString(s) {
			return "", invalidModel(model)
		}
	}
	return segs[0] + "/" + segs[1], nil
}

func invalidModel(model string) error {
	return &provider.Error{Class: provider.Invalid,
		Message: fmt.Sprintf("model %q is not a fal model id (owner/app[/subpath])", clip(model, 200))}
}

var idRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// checkID accepts request ids that are one plain path segment (fal's are
// UUIDs).
func checkID(id string) error {
	if !idRe.MatchString(id) {
		return &provider.Error{Class: provider.Invalid, Message: fmt.Sprintf("request id %q is not valid", clip(id, 200))}
	}
	return nil
}
