// Package faceshape owns the shapes Pollux's faces show a job in — the
// output URLs a face hands an app, Replicate's prediction object, and
// fal's result, error and webhook bodies — so that the faces' answers and
// the outbound webhooks that carry the same object (package notify,
// which may not import the faces) are one rendering, not two.
package faceshape
