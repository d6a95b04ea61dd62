// Package faces runs the official provider SDKs — replicate, @fal-ai/client
// and openai, pinned in examples/sdks/package.json — unchanged against
// Pollux's provider faces served by the real binaries (ingest's front door,
// the poller) over a real nats-server, with the simulated provider behind
// the faces' route. Each SDK's script (examples/sdks/*.mjs) prints what it
// saw as JSON lines; the tests hold them to what the provider would answer
// and to the simulated provider's ground truth — through a gateway's
// SIGKILL, and through a 60 s NATS outage (TestFacesThroughANATSOutage:
// no app's poll fails, every job the provider ran has an id an app
// holds).
package faces
