package state

import "time"

// Custody is what Pollux kept of a succeeded job's outputs before the
// provider deletes them (a route's keep_outputs; see package custody),
// and whether it warned that they were about to expire unsaved.
type Custody struct {
	// Outputs has one entry per output URL, in the order of Job.Outputs;
	// empty until every output has an outcome (the outputs_saved event).
	Outputs []SavedOutput `json:"outputs,omitempty"`
	// SavedAt is when the outcomes were recorded (outputs_saved).
	SavedAt time.Time `json:"saved_at,omitzero"`
	// ExpiringAt is when outputs_expiring was emitted: the outputs were
	// due to expire soon and were not saved. Emitted at most once.
	ExpiringAt time.Time `json:"expiring_at,omitzero"`
}

// Outcomes of an output's custody (SavedOutput.Status).
const (
	// OutputSaved: the output is in the outputs bucket under Object.
	OutputSaved = "saved"
	// OutputGone: the provider answered 404 or 410: it was deleted
	// before it could be copied.
	OutputGone = "gone"
	// OutputTooLarge: the output is larger than the route's max_bytes;
	// it was not kept.
	OutputTooLarge = "too_large"
	// OutputFailed: every copy failed until the outputs expired (or the
	// horizon passed); Reason has the last failure.
	OutputFailed = "failed"
)

// SavedOutput is the custody outcome of one output.
type SavedOutput struct {
	// Index is the output's position in Job.Outputs.
	Index int `json:"index"`
	// Status is one of OutputSaved, OutputGone, OutputTooLarge,
	// OutputFailed.
	Status string `json:"status"`
	// Object is the object's name in the outputs bucket ("<job>/<index>"),
	// when saved.
	Object string `json:"object,omitempty"`
	// Size is the object's size in bytes, when saved.
	Size int64 `json:"size,omitempty"`
	// Digest is the object's digest as the object store records it
	// ("SHA-256=<base64url>"), when saved.
	Digest string `json:"digest,omitempty"`
	// ContentType is the output's media type, when saved.
	ContentType string `json:"content_type,omitempty"`
	// Reason says why an output was not saved.
	Reason string `json:"reason,omitempty"`
	// Attempts is the pass over the job's outputs (1, 2, ...) that
	// decided this outcome: 1 when the first download did.
	Attempts int `json:"attempts,omitempty"`
}

// OutputsUnsaved reports whether some of a job's outputs may still be
// at the provider without a copy kept: custody has not recorded them, or
// recorded one too large or failed (a gone one is gone either way).
func (j *Job) OutputsUnsaved() bool {
	if len(j.Outputs) == 0 {
		return false
	}
	c := j.Custody
	if c == nil || c.SavedAt.IsZero() {
		return true
	}
	for _, o := range c.Outputs {
		if o.Status == OutputTooLarge || o.Status == OutputFailed {
			return true
		}
	}
	return false
}
