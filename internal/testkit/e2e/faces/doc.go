// Package faces runs the official provider SDKs — replicate, @fal-ai/client
// and openai, pinned in examples/sdks/package.json — unchanged against
// Pollux's provider faces served by the real binaries (ingest's front door,
// the poller) over a real nats-server, with the simulated provider behind
// the faces' route. Each SDK's script (examples/sdks/*.mjs) prints what it
// saw as JSON lines; the tests hold them to what the provider would answer
// and to the simulated provider's ground truth.
package faces
