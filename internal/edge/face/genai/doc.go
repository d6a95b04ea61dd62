// Package genai is Pollux's Google face: Veo's long-running video
// operations as the official @google/genai SDK (3.1.0) speaks them,
// served below /genai/{route} (the SDK's httpOptions.baseUrl is
// http://POLLUX/genai/{route}; its apiKey, sent as x-goog-api-key, is a
// Pollux token).
//
// @google/genai 3.1.0 sends ai.models.generateVideos only in Vertex AI
// mode (new GoogleGenAI({vertexai: true, apiKey, httpOptions: {baseUrl}}),
// Vertex's express mode): in Gemini API mode it throws before sending
// anything. The face serves both shapes; an app of either, or of the REST
// API, works unchanged:
//
//   - POST /{version}/models/{model}:predictLongRunning (the Gemini API)
//     and POST /{version}/publishers/{publisher}/models/{model}:predictLongRunning
//     (Vertex AI): the body ({instances: [one instance: prompt, image,
//     lastFrame, …], parameters: {…}}) becomes the submission's input as
//     it is, the path's model its model (publisher/model for a publisher
//     other than google). An inline image (bytesBase64Encoded with an
//     image mimeType) travels inside the submission: the body is at most
//     256 KiB. An unknown top-level field, no instance, an instance with
//     neither prompt nor image, bad base64 are 400 INVALID_ARGUMENT naming
//     the field. The answer is the operation {name}: models/{model}/operations/{id},
//     prefixed publishers/{publisher}/ on Vertex.
//   - GET /{version}/models/{model}/operations/{id} (the Gemini API's
//     getVideosOperation) and POST …/models/{model}:fetchPredictOperation
//     {operationName} (Vertex's): the job's record as the operation —
//     no done until the job ends; then response.generateVideoResponse
//     .generatedSamples[].video.uri (Gemini) or response.videos[].gcsUri
//     (Vertex), or error {code, message}: failed 13, canceled 1, expired
//     4, lost 2, with the record's reason.
//   - GET /{version}/files/{id}{n}:download?alt=media (each video's uri;
//     what ai.files.download fetches): the bytes output custody kept,
//     else a 302 to the provider's URL (face.Kit.Output). The SDK parses a
//     file's name out of an https uri only: over plain http an app passes
//     {file: 'files/{id}{n}'}, or fetches the uri itself with its key.
//
// The SDK reads no poll hint (Google's samples poll every 10 s); through
// an outage an operation this process knows is answered not done
// (face.Kit.Poll). Errors are Google's {"error": {code, message, status}}:
// a bad key 401 UNAUTHENTICATED, a read-only key 403 PERMISSION_DENIED,
// an operation the face may not see 404 NOT_FOUND, a quota 429
// RESOURCE_EXHAUSTED with Retry-After; the SDK throws each as its
// ApiError with the status. Operation ids are 26 characters of lowercase
// base32, derived from the route and an Idempotency-Key header when the
// create has one (httpOptions.headers), so a create retried with it is
// one job; the SDK itself retries nothing by default.
package genai
