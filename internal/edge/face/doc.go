// Package face holds what Pollux's provider faces share. A face answers a
// provider's own wire shape — Replicate's predictions API, fal's queue
// through the fal client's proxy protocol, OpenAI's videos API — so an
// application written against that provider's official SDK works against
// Pollux unchanged but for its base URL, and every instance of it, however
// often its SDK polls, costs the provider nothing beyond Pollux's own
// schedule.
//
// A face is mounted for a route (or model route) by the route's
// configuration (faces: [replicate, fal, openai, genai, runway, luma]) and
// served by the front door at /{kind}/{route}/..., behind the front door's
// Host check and tokens: the SDK's API key is a Pollux token (any of
// Bearer, Token or Key schemes, or the header of its own a face's SDK
// sends it in: KeyHeader), and the provider's key stays in Pollux. Each
// face lives in a package of its own below this one; this package is the
// framework they are written on, and the contract between a face and the
// front door:
//
//   - Pollux is what a face may ask of Pollux: publish a submission, read a
//     record, list the records the face made, wait for a record to change,
//     ask for a cancel, serve an output. A face never calls a provider: a
//     status request is answered from the job's record (kept current by
//     Pollux's polls and webhooks).
//   - Face is what the front door asks of a face: its handler, and how to
//     write an error in the provider's own shape (the front door's own
//     refusals — a bad token, a read-only token acting, an exceeded quota
//     — reach the SDK as the provider's errors).
//   - Error is an error: a handler is a Handler, func(w, r) error, and
//     Serve writes whatever it returns in the face's shape — a *Error as
//     it says (a Pollux method's refusals are *Error values too), anything
//     else logged once and answered 503 with Retry-After, so no error
//     reaches an SDK in any shape but its provider's. WriteJSON writes an
//     answer.
//   - Kit is what a face embeds, and its only way to Pollux. Kit.Job is
//     the one place that decides whether a face may see a job — one it
//     made (metadata "face" names it, its id is of the face's shape) on
//     its route, or submitted through its model route, of an app the
//     caller's token sees (tenant.Viewer, which the front door puts in
//     the request's context); anything else is the face's NotFound, the
//     same answer as an unknown id, for every verb. List asks the same
//     of every job it answers. The kit waits for a record that does not exist yet (a create
//     racing ingest, on this gateway or another), answers a create whose
//     record is late from the create itself (Created), waits for a job to
//     end (Ended), cancels (Cancel), lists (List) and knows the face's own
//     URL (Base).
//   - Outages: while Pollux cannot read records (NATS restarting,
//     failing over, out of reach), Pollux.Job answers a 503 carrying an
//     Outage: the record this process last read of the job — at once, for
//     a poll (Polling) of a job read before, when the connection is known
//     to be down. Kit.Job answers a job
//     whose last record had ended from it (an ended job never changes);
//     Kit.Poll — the verb an app repeats until its job ends: Replicate's
//     get, fal's status, OpenAI's retrieve — also a job under way, or a
//     create answered before its record existed, as not ended, with its
//     next check at least OutagePollAfter (5 s) away, so an SDK polling
//     through an outage never meets the 503 its few retries would give
//     up on. What may be stale never says a job ended. An id this
//     process knows nothing of is the 503.
//   - Outputs: Kit.OutputURL is the one way a face gives an app an output
//     URL — Pollux's own on the face (OutputPath, served by
//     Kit.ServeOutput) for an output the route keeps (Kept: custody saved
//     it, or has yet to copy it), which outlives the provider's copy;
//     else the provider's when it is a safe http(s) URL (ProviderURL);
//     else none.
//   - IDBytes mints the job id of a create: derived from the route and the
//     create's idempotency key when it has one, so a create retried with
//     the same key is one job; random otherwise. Each face formats it as
//     its provider's ids look.
//   - IdempotencyKey and ReadBody read what every create carries — its
//     key, and (for the JSON faces) its body, bounded — each refusal a
//     *Error the face's Serve writes in its provider's shape.
//
// So a face is its error shape (WriteError), its Shape for the kit
// (NotFound, Mints), its routes (each a Handler under Serve), and its
// mapping table: a create's body to a
// submission, a record to the provider's object.
//
// Who may act is the front door's to decide, before a face sees the
// request: a read-only token is refused (403, in the face's shape) every
// method that changes state — anything but GET, HEAD and OPTIONS. So a
// face serves every verb that acts (a create, a cancel, a delete) on such
// a method, never on a GET; the front door's
// TestAReadTokenMayNotActThroughAFace holds every face's every acting verb
// to it.
//
// Package facetest holds an in-memory Pollux for the faces' tests.
package face
