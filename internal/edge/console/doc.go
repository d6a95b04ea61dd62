// Package console is Pollux's web console: a single-page application of
// hand-written ES modules, CSS and SVG charts drawn by its own JavaScript,
// embedded in the binary and served by Handler under /console/. It has no
// build step and loads nothing from elsewhere: what is in assets/ is what
// the browser runs.
//
// The console is a client of the front door's HTTP API (package
// frontdoor), nothing more: it reads /v1/routes, /v1/jobs, /v1/stream, /v1/spend,
// /v1/jobs/{id}/events and /v1/routes/{route}/models/{model}, asks
// /console/session who the browser is, and sends every state-changing
// request with the session's X-CSRF-Token. The front door mounts Handler
// at /console/ and serves /console/session, /console/login and
// /console/logout itself.
//
// Its pages are hash routes, so a link names a view and its filters:
//
//	#/                          overview: every route, its state and the last hour
//	#/jobs?route=&state=&...    the jobs, filtered, newest first, live
//	#/jobs/{id}?route=          one job: its record and its event timeline
//	#/models/{route}/{model}    a model's durations and the poll plan over them
//	#/track                     track a job submitted elsewhere
//	#/spend                     each app's spend: a bar a day against its budget, costs by route and model
package console
