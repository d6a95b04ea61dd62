// Package veo is the adapter for Google Veo on the Gemini API
// (generativelanguage.googleapis.com/v1beta), whose jobs are long-running
// operations. The key goes in the x-goog-api-key header, never in the URL.
//
// Submit posts to /v1beta/models/{model}:predictLongRunning, model being
// "veo-3.1-generate-preview" or "models/veo-3.1-generate-preview". The job's
// input maps to the PredictLongRunningRequest body in one of two ways:
//
//   - an input with "instances" is that body, sent as it is:
//     {"instances": [{"prompt": "..."}], "parameters": {"aspectRatio": "16:9"}};
//   - any other input is the one instance, with an optional "parameters"
//     member lifted out: {"prompt": "...", "parameters": {...}} is sent as
//     {"instances": [{"prompt": "..."}], "parameters": {...}}.
//
// Field names are the REST ones (camelCase: aspectRatio, negativePrompt,
// durationSeconds, ...), as the SDKs' Gemini-API converters write them.
// The operation's name ("models/{model}/operations/{id}") is the remote id.
//
// Status is GET /v1beta/{name}. An operation has no status value, only
// done: a submitted operation is queued, and one not yet done at a later
// read is running (Google exposes no queue). Raw is "done=false" or
// "done=true". Done with error (a google.rpc.Status) is failed with its
// message and code; code 1 (CANCELLED) is canceled [unconfirmed for Veo].
// Done with a response is read at response.generateVideoResponse:
// generatedSamples[].video.uri are the outputs, and a response with no
// video but raiMediaFilteredCount or raiMediaFilteredReasons is failed
// with the filter reasons, since success needs a video. A done operation
// with neither error nor response is left unknown. The operation metadata
// "typically contains progress" but not for Veo as far as anyone has
// confirmed, so no progress is read.
//
// Outputs are Gemini Files API URIs: downloading them needs the same API
// key, which OpenOutput (provider.OutputOpener: output custody's
// downloads) sends to the API's host only. Google keeps generated videos for two days [3p, quoting the Gemini
// video docs]. An operation carries no completion time, so OutputsExpireAt
// is two days after Pollux first reads the finished operation, at most one
// poll interval later than the true expiry.
//
// Errors: a 404 (an unknown or purged operation) is not-found, which Pollux
// reconciles; 429 RESOURCE_EXHAUSTED pauses the route, with the delay of a
// google.rpc.RetryInfo detail when there is no Retry-After; 401/403 pause it
// and alert, and so does a 400 whose ErrorInfo reason is API_KEY_INVALID,
// Google's answer to a wrong key; other 4xx are invalid input.
//
// Not done: cancel (LRO cancel is not confirmed for Veo; Info().Cancel is
// false), Gemini webhooks (beta, registered per project), Vertex AI
// (another host, OAuth, fetchPredictOperation), and any progress.
package veo
