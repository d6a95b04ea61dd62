// Package genai is Pollux's Google face: Veo's long-running video
// operations as the official @google/genai SDK (3.1.0) speaks them, served
// below /genai/{route} (the SDK's httpOptions.baseUrl is
// http://POLLUX/genai/{route}; its apiKey, sent as x-goog-api-key, is a
// Pollux token). @google/genai 3.1.0 sends generateVideos only in Vertex
// AI mode (vertexai: true with an apiKey: Vertex's express mode); the face
// serves the Gemini API's shape too, for REST apps and older SDKs:
//
//   - POST /{version}/models/{model}:predictLongRunning (Gemini) and POST
//     /{version}/publishers/{publisher}/models/{model}:predictLongRunning
//     (Vertex): the body ({instances: [one: prompt, image, …], parameters})
//     is the submission's input, the path's model its model
//     (publisher/model for a publisher other than google). An inline image
//     (bytesBase64Encoded, the SDK's imageBytes) of 64 KiB or more is kept
//     as an input file and named by its reference (keepImages); a smaller
//     one travels inside the submission (the body is at most 16 MiB).
//     Answered with the operation {name}.
//   - GET /{version}/models/{model}/operations/{id} (Gemini's
//     getVideosOperation), POST …/models/{model}:fetchPredictOperation
//     (Vertex's): the record as the operation — no done until the job
//     ends, then generateVideoResponse.generatedSamples[].video.uri
//     (Gemini) or videos[].gcsUri (Vertex), or error {code, message}.
//   - GET /{version}/files/{id}{n}:download (each video's uri, what
//     ai.files.download fetches): the bytes output custody kept, else the
//     provider's bytes streamed through Pollux — never a redirect, which
//     would carry the SDK's x-goog-api-key (the app's token) to the
//     provider's origin (face.Proxied, face.Kit.Output).
//
// Errors are Google's {"error": {code, message, status}}, which the SDK
// throws as its ApiError. Operation ids are 26 characters of lowercase
// base32, derived from an Idempotency-Key header when the create has one.
// docs/faces.md has the whole mapping.
package genai
