package fal

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
)

// TargetHeader carries the URL the fal client meant to call.
const TargetHeader = faceshape.FalTargetHeader

// QueueHost is the one host a target may name: fal's queue API.
const QueueHost = "queue.fal.run"

// Bounds of a target.
const (
	maxTargetLen = 2048
	maxSegments  = 16
)

// op is what a target asks for.
type op int

const (
	opSubmit op = iota
	opStatus
	opResult
	opCancel
	// opStatusStream streams a request's status.
	opStatusStream
	// opUpload initiates a storage upload (fal's storage client).
	opUpload
)

// StorageHost is the host of fal's storage API, whose upload initiate
// the face serves; the upload itself goes to Pollux's front door.
const StorageHost = "rest.fal.ai"

// storage hosts fal's clients name: the current and the older one.
var storageHosts = map[string]bool{StorageHost: true, "rest.alpha.fal.ai": true}

// target is a parsed x-fal-target-url.
type target struct {
	op op
	// app is the app id the status, result and cancel URLs are built
	// from: owner/app, after its namespace when it has one.
	app string
	// endpoint is the full endpoint id a submit names: app[/path].
	endpoint string
	// id is the request id of a status, result or cancel.
	id string
	// logs is a status's logs=1.
	logs bool
	// webhooks are a submit's fal_webhook query parameter's values (nil:
	// none).
	webhooks []string
}

// namespaces are the first segments fal's client treats as a namespace
// before owner/app (its parseEndpointId).
var namespaces = map[string]bool{"workflows": true, "comfy": true}

var (
	segmentRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	uuidRe    = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// parseTarget checks the target URL of a request of method and says what
// it asks for. Only https://queue.fal.run/... is a target: any other host,
// scheme, port, userinfo, percent-encoding or dot segment is refused
// (412, as fal's own proxies refuse a foreign target), and nothing is
// ever fetched from it — every answer comes from Pollux.
func parseTarget(raw, method string) (target, *face.Error) {
	var t target
	switch {
	case raw == "":
		return t, &face.Error{Status: http.StatusBadRequest, Code: "missing_target", Field: TargetHeader,
			Message: "missing the " + TargetHeader + " header: configure the fal client with proxyUrl: {url, when: \"always\"}"}
	case len(raw) > maxTargetLen:
		return t, refuse("longer than %d bytes", maxTargetLen)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f || c == '\\' || c == '#' {
			return t, refuse("it may hold no spaces, control characters, '\\' or '#'")
		}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return t, &face.Error{Status: http.StatusBadRequest, Code: "invalid_target", Field: TargetHeader, Message: TargetHeader + ": not a URL"}
	case u.Scheme != "https":
		return t, refuse("must be an https URL")
	case u.User != nil:
		return t, refuse("must not carry userinfo")
	case u.Opaque != "":
		return t, refuse("must be https://%s/...", QueueHost)
	case u.RawPath != "" || strings.Contains(u.EscapedPath(), "%"):
		return t, refuse("its path must not be percent-encoded")
	case u.Host == "fal.run" || strings.HasSuffix(u.Host, ".fal.run") && u.Host != QueueHost:
		return t, refuse("%s is not fal's queue: Pollux serves the queue API (fal.subscribe, fal.queue.*), not fal.run()", u.Host)
	case storageHosts[u.Host] && u.Path == "/storage/upload/initiate":
		t.op = opUpload
		return t, checkMethod(method, http.MethodPost, "an upload's initiate")
	case storageHosts[u.Host] && u.Path == "/storage/upload/initiate-multipart":
		return t, &face.Error{Status: http.StatusRequestEntityTooLarge, Code: "file_too_large", Field: "file",
			Message: "multipart uploads (files over 90 MB) are not served by Pollux: upload a smaller file, or pass the file as a URL"}
	case u.Host == "fal.ai" || strings.HasSuffix(u.Host, ".fal.ai"):
		return t, refuse("%s is not fal's queue: Pollux serves the queue API and storage uploads only (no tokens or other storage calls)", u.Host)
	case u.Host != QueueHost:
		return t, refuse("only https://%s/... is served", QueueHost)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return t, refuse("its query does not parse")
	}
	path := strings.TrimPrefix(u.Path, "/")
	path = strings.TrimSuffix(path, "/") // the client adds one to a URL endpoint id
	segs := strings.Split(path, "/")
	if len(segs) > maxSegments {
		return t, refuse("more than %d path segments", maxSegments)
	}
	for _, s := range segs {
		if !segmentRe.MatchString(s) {
			return t, refuse("its path must be /{owner}/{app}[/{path}] of [A-Za-z0-9._-] segments (no empty or dot segments)")
		}
	}
	base := 2
	if namespaces[segs[0]] {
		base = 3
	}
	if len(segs) < base {
		return t, refuse("its path must name an app: /{owner}/{app}[/{path}]")
	}
	t.app = strings.Join(segs[:base], "/")
	if len(segs) == base || segs[base] != "requests" {
		t.op, t.endpoint, t.webhooks = opSubmit, path, q["fal_webhook"]
		return t, checkMethod(method, http.MethodPost, "a submit")
	}
	rest := segs[base+1:]
	if len(rest) == 0 {
		return t, notFound("no such queue endpoint")
	}
	t.id = rest[0]
	switch strings.Join(rest[1:], "/") {
	case "":
		t.op = opResult
		return t, checkMethod(method, http.MethodGet, "a result")
	case "status":
		t.op, t.logs = opStatus, q.Get("logs") == "1"
		return t, checkMethod(method, http.MethodGet, "a status")
	case "cancel":
		t.op = opCancel
		return t, checkMethod(method, http.MethodPut, "a cancel")
	case "status/stream":
		t.op, t.logs = opStatusStream, q.Get("logs") == "1"
		return t, checkMethod(method, http.MethodGet, "a status stream")
	}
	return t, notFound("no such queue endpoint")
}

// refuse is the 412 of a target Pollux does not serve.
func refuse(format string, args ...any) *face.Error {
	msg := TargetHeader + ": " + fmt.Sprintf(format, args...)
	return &face.Error{Status: http.StatusPreconditionFailed, Code: "target_refused", Field: TargetHeader, Message: msg}
}

func checkMethod(method, want, what string) *face.Error {
	if method == want {
		return nil
	}
	return &face.Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: what + " takes " + want + ", not " + method,
		Header: http.Header{"Allow": {want}}}
}

func notFound(msg string) *face.Error {
	return &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: msg}
}
