// Package sim is a simulated video-generation provider: a real HTTP server
// that speaks Replicate's predictions wire format, so that Pollux's
// Replicate adapter talks to it exactly as to api.replicate.com. It owns
// its predictions' ground truth and counts everything clients do, so tests
// can judge a client by what really happened. It imports nothing of
// Pollux's: webhook signing is its own few lines of crypto/hmac.
//
// # Use
//
//	s, err := sim.New(sim.Config{TimeScale: 20, Faults: sim.Faults{RateLimitRate: 0.01}})
//	srv := httptest.NewServer(s.Handler())          // or an http.Server of your own
//	g.Go(func() error { return s.Run(ctx) })        // errgroup; only needed for webhooks
//	// point the Replicate adapter at srv.URL; afterwards:
//	st, truth := s.Stats(), s.Predictions()
//
// A config file (YAML or JSON, strict) is read with LoadConfig; see
// testdata/sim.yaml for a commented example.
//
// # API
//
//	POST /v1/predictions                        {version, input, webhook?, webhook_events_filter?}
//	POST /v1/models/{owner}/{name}/predictions  {input, webhook?, webhook_events_filter?}
//	POST /v1/deployments/{owner}/{name}/predictions
//	GET  /v1/predictions[?created_after=&created_before=&cursor=]
//	                                            200 {next, previous, results}: newest first
//	GET  /v1/predictions/{id}                   200 prediction | 404 {"detail":"Not found."}
//	POST /v1/predictions/{id}/cancel            200 prediction (canceled unless already terminal)
//	GET  /v1/webhooks/default/secret            {"key":"whsec_..."}
//	GET  /_sim/stats                            Stats
//	GET  /_sim/predictions                      []Prediction (ground truth)
//	POST /_sim/reset-stats                      zero the counters (204)
//
// Creates answer 201 with Replicate's prediction object. Bodies over
// MaxBodyBytes get 413, malformed JSON 400, and a missing version, an input
// that is not a JSON object, a bad webhook URL, filter or Cancel-After 422
// {"title","detail","status"}. Unknown models and versions are fine: they
// use Config.Default. Headers: Cancel-After (a duration such as "90s" or
// "1h30m", or seconds) ends a prediction still starting at the deadline as
// "aborted" and one processing as "canceled"; Idempotency-Key (a sim
// extension) returns the prediction first made with that key, again with
// 201, unless Faults.NotIdempotent; "Prefer: wait" is ignored (the answer
// never waits).
// The list holds ListPageSize predictions a page, "next" the URL of the
// following one; each prediction carries the webhook URL it was created
// with (a sim extension: Replicate's list does not), so a client can find
// a prediction whose create answer it lost (the Replicate adapter's
// find_by_webhook option). Lost predictions are not listed.
// When Config.Token is set every /v1 call needs "Authorization: Bearer
// <token>". Any /v1 call may be answered 429 (see Faults and Limits).
//
// # Time
//
// Each prediction draws, at creation, a queue time and a run time
// (lognormal around the model's medians, divided by Config.TimeScale) and
// its fate: succeed, fail (Model.FailRate) or never finish
// (Model.NeverFinish). Its status is computed from the clock on every
// request: "starting" until created+queue, "processing" until +run, then
// "succeeded" (output ["https://replicate.delivery/sim/<id>/output.mp4"],
// metrics.predict_time) or "failed" (error FailureMessage); cancels and
// deadlines end it earlier. While processing, logs holds tqdm-style lines
// (" 45%|████▌     | 45/100 [00:01<00:01, 30.00it/s]") consistent with the
// time spent. Timestamps and metrics are real (scaled) time. With the same
// Seed, the n-th prediction created gets the same fate.
//
// # Faults
//
// Per /v1 call (after Latency and authentication): during a throttle
// episode the call is answered 429 with Retry-After (the time left in whole
// seconds, at least 1) and {"detail":"Request was throttled. Your rate
// limit resets in ~Ns."}; otherwise, unless Limits.Rate refuses it (see
// Limits), with probability RateLimitRate it starts an episode lasting
// RetryAfter, for the whole account. Calls later than RetryAfterGrace after
// an episode's first 429 and before its end are counted as
// Stats.CallsBeforeRetryAfter. Then, with probability ServerErrorRate, the
// call gets 500, 502 (an HTML body) or 503 and has no effect. Per
// prediction: LostRate makes it vanish at a random moment before its
// natural end (404 from then on, no webhook); the webhook rates drop,
// duplicate or delay its "completed" webhook.
//
// # Limits
//
// Config.Limits are the account's hidden limits, which a client must keep
// to without being told them: unlike a throttle episode's, their 429s carry
// no Retry-After and no time to wait in the body. They are independent of
// the faults, and zero limits nothing.
//
// Limits.Rate is a token bucket over every /v1 call that passes
// authentication and is not answered by a throttle episode (creates,
// status calls, cancels, the secret): it holds max(1, ceil(Rate)) calls and
// refills at Rate per second of real time. A call that finds it empty is
// answered 429 {"title":"Too Many Requests","detail":"Request was
// throttled: the account is limited to R requests per second.",
// "status":429} and has no effect (no fault is drawn for it).
//
// Limits.Running caps the predictions non-terminal at once ("starting" or
// "processing"; lost ones no longer count). A create that would make one
// more, after it passed validation, is answered 429 {"title":"Concurrency
// limit reached","detail":"You have reached the limit of N predictions
// running at once. Wait for one to finish before creating another.",
// "status":429} and makes nothing; a create that returns an existing
// prediction for its Idempotency-Key makes none, so it is not refused.
// Both refusals count in Stats.RateLimited (not in Creates), and in
// Stats.RateRefused or Stats.RunningRefused.
//
// # Webhooks
//
// Run sends them. A prediction with a webhook gets a "completed" webhook
// at its terminal moment when its webhook_events_filter is absent or holds
// "completed", and a "start" webhook when processing starts if the filter
// holds "start" ("output" and "logs" are accepted, never sent). The body is
// the prediction as it was at that moment; headers follow Standard Webhooks:
// webhook-id (stable across retries and duplicates), webhook-timestamp
// (this attempt) and webhook-signature "v1,<base64 HMAC-SHA256>" over
// "id.timestamp.body" with the key decoded from WebhookSecret. A
// "completed" webhook is retried on non-2xx answers and connection errors:
// up to 6 attempts, 0.25 s·2^n apart, or the receiver's Retry-After on a
// 429 or 503. A "start" webhook has one attempt.
//
// # Ground truth
//
// Stats counts creates, duplicate creates per Idempotency-Key, status and
// cancel calls, peak concurrency of calls, 429s and Retry-After
// violations, the calls the limits refused, 5xx, 404s and webhook attempts
// and outcomes. It also gives the predictions running now and the most
// that were running at once (PeakRunning): a prediction runs from its
// create to the moment it becomes terminal, is canceled or vanishes, and
// the count is taken at every create, the only moment it can rise, so the
// peak is exact whatever the clients saw. Predictions gives, per
// prediction, its true status and times (even those no client saw),
// whether it is lost or never finishes, its status calls and whether its
// webhook was delivered.
package sim
