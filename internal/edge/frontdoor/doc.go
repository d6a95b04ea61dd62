// Package frontdoor is Pollux's HTTP front door, for callers without a NATS
// client and for the console: it turns HTTP requests into the same intake
// messages any NATS client publishes, reads job records from the jobs
// bucket, lists jobs from the in-memory index (package index), streams
// events as Server-Sent Events, pauses and resumes routes, and shows what
// is learned of each model. It is a client of the v1 contract (package
// events), not a second way in: everything it accepts is validated by the
// contract's decoders and handled by ingest.
//
//	POST /v1/jobs                       submit: {"route": ..., plus the fields of a submission}; 202
//	GET  /v1/jobs?route=&state=a,b&model=&created_after=&created_before=&q=&cursor=&limit=
//	                                    a page of jobs, newest first: {"jobs","next","total","total_capped"}
//	POST /v1/jobs/track                 track a job submitted elsewhere: {"route", plus a track message}; 202
//	GET  /v1/jobs/{id}                  the job's record (its snapshot, as events carry it)
//	POST /v1/jobs/{id}/cancel           cancel: {"reason"?}; 202
//	GET  /v1/jobs/{id}/events           the job's events from its first, as text/event-stream, until the terminal one
//	GET  /v1/stream?route=              every change to the index's jobs, as text/event-stream (event "job")
//	GET  /v1/routes                     every route: state, pauses, census, counts by state, last hour
//	POST /v1/routes/{name}/pause        {"reason"?, "for"?: "30m" | "until"?: RFC 3339}: an operator's pause
//	POST /v1/routes/{name}/resume       {"reason"?}: its end
//	GET  /v1/models?route=              the models seen, with what is learned of them
//	GET  /v1/routes/{name}/models/{m}   a model's learned durations, poll plan, and its cost vs a fixed interval and an SDK
//	GET  /console/session               who the browser is, and its CSRF token; 401: log in
//	POST /console/login                 form field token: sets the session cookie
//	POST /console/logout                clears it
//	/console/...                        the console (Config.Console); / redirects there
//
// Every error is a JSON body {"error":{"code","message","field"?}} whose
// code is one of the Code constants; api/openapi.yaml describes it all.
//
// A job id is known when POST /v1/jobs answers: the id given, else the one
// derived from the idempotency key (the body's idempotency_key or the
// Idempotency-Key header, which must agree), else a random one the front
// door assigns.
//
// # NATS outages
//
// A NATS restart, a failover or a node out of reach must not surface to
// the apps of the faces, nor make a job no app holds an id for:
//
//   - Reads (known.go). The front door remembers the last record it read
//     of each job a face asked about (Config.LastKnown of them, each at
//     most 8 KiB). While records cannot be read, a face's read is a 503
//     that carries that record (face.Outage), from which the face
//     answers its app's polls: not ended, unless the record read had
//     ended (face.Kit.Poll). A poll of a job read before gets it at once
//     when the connection to NATS is known to be down; any other read
//     first waits for the connection, at most ConnectWait. An id never
//     read is the 503.
//   - Creates (intake.go, settle.go). A submission (and a track request)
//     carries Nats-Msg-Id events.IntakeMsgID and is sent only while the
//     connection is up, on a connection without a reconnect buffer
//     (Config.Intake): while it is down the request waits at most
//     ConnectWait, then is a 503 — nothing was or will be stored. One sent
//     and not acked is held and sent again with the same Msg-Id whenever
//     NATS answers, until an ack (stored once: 202), for at most
//     DoubtWait; then it is a 503 and settled once NATS answers: its job's
//     record created ended before ingest takes the stored copy
//     (jobs.Owner.Withdraw), or its cancel requested when ingest took it
//     first — logged loudly, counted (Metrics.Unconfirmed).
//
// With tracing on (package tracing), a submission or track request is a
// span of its own, a child of the request's traceparent header, and the
// intake message it publishes carries that span's context: the job's
// trace descends from the caller's.
//
// # Access
//
// With a tokens file (Config.Tokens, LoadTokens) every request but the
// console's pages and login carries a token: "Authorization: Bearer
// <token>", or the session cookie a console login sets. A line of the file
// is a token, optionally its role — act (the default: may submit, track,
// cancel, pause and resume) or read (every state-changing request is
// answered 403) — name=<who>, which pauses record as who acted and logs
// show (never the token), and rate=<n>, the token's quota: n requests a
// second across the fleet (a second's worth at once, then n a second),
// beyond which a request is answered 429 too_many_requests with
// Retry-After (quota.go). "Token" and "Key" are
// taken for "Bearer", as the provider SDKs a face serves send them
// (package face). The file is reread when it changes: a
// token removed from it stops working at the next request, the sessions
// it started included. A session cookie is stateless, signed with a key
// derived from its token, so every front door of a fleet with the same
// file accepts it.
//
// Whatever the tokens, a state-changing request whose Origin header names
// another host is refused, and a browser's (made with the session cookie,
// or with an Origin to a front door without tokens) must carry the CSRF
// token of GET /console/session in X-CSRF-Token: a page on another site
// cannot make a browser act on Pollux, not even on a loopback one.
// Without a tokens file anyone who reaches the front door may act, so
// every binary that serves it follows one rule (listen.go): it listens
// beyond loopback only when told a gateway in front authenticates
// (CheckExposure, Listen: --http-insecure), and it answers only requests
// whose Host is localhost, a loopback address or one of
// Config.AllowedHosts; any other gets 421 host_not_allowed on every path,
// which stops DNS rebinding. With tokens any Host is answered unless
// AllowedHosts is set.
package frontdoor
