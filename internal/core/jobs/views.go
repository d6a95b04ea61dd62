package jobs

import (
	"context"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The owner's views. Each service sees the owner through one: the verbs
// it hands its decisions with, and the two reads every service decides
// on (a job's record, and the tracer its spans start with). The Owner
// itself keeps only what readers need (Get, Each, Check, Namespace,
// Tracer) and hands the views out:
//
//	view      for              verbs (file)
//	Intake    ingest           Accept Hold Attempt Submitted IndexRemote Refused Requeue
//	                           End Canceled RequestCancelBy Resume Reject Read (intake.go)
//	Polls     the poller       Open Wait Postpone Polled Settle (poll.go)
//	Webhooks  the webhook      ByRemote Webhook Hint (webhook.go)
//	          receiver
//	Custody   output custody   SaveOutputs OutputsExpiring (custody.go)
//
// A view is a value over its owner: copy it freely; the zero view has no
// owner and is good for nothing but Tracer (nil).

// Intake is the owner as ingest sees it: the verbs that take a job from a
// submission to the provider's answer.
type Intake struct{ reads }

// Polls is the owner as the poller sees it: one verb per step of a check
// delivery.
type Polls struct{ reads }

// Webhooks is the owner as the webhook receiver sees it: the verbs that
// apply a delivery or a callback from outside the job's check.
type Webhooks struct{ reads }

// Custody is the owner as output custody sees it: the records of a
// succeeded job's outputs.
type Custody struct{ reads }

// Intake returns ingest's view of the owner.
func (o *Owner) Intake() Intake { return Intake{reads{o}} }

// Polls returns the poller's view of the owner.
func (o *Owner) Polls() Polls { return Polls{reads{o}} }

// Webhooks returns the webhook receiver's view of the owner.
func (o *Owner) Webhooks() Webhooks { return Webhooks{reads{o}} }

// Custody returns output custody's view of the owner.
func (o *Owner) Custody() Custody { return Custody{reads{o}} }

// reads are the reads every view has.
type reads struct{ o *Owner }

// Get returns job id's record, or state.ErrNotFound.
func (r reads) Get(ctx context.Context, id string) (*state.Job, error) { return r.o.Get(ctx, id) }

// Tracer returns the tracer of the jobs' spans (nil: tracing off; see
// Owner.Tracer).
func (r reads) Tracer() *tracing.Tracer { return r.o.Tracer() }

// Read returns job id's record as it stands, to decide on and hand back
// with the write that follows (state.ErrNotFound when there is none).
func (in Intake) Read(ctx context.Context, id string) (Record, error) {
	return in.o.store.get(ctx, id)
}
