package tenant

import (
	"context"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Viewer is what a caller may see. Its zero value sees every app's jobs
// (Operator): a scoped Viewer sees only its App's.
type Viewer struct {
	// Scoped limits the viewer to App's jobs.
	Scoped bool
	// App is the app whose jobs a scoped viewer sees ("": the jobs of no
	// app, those made by a token of none or over NATS naming none).
	App string
}

// Operator sees every app's jobs.
var Operator = Viewer{}

// Of is the viewer of one app's jobs.
func Of(app string) Viewer { return Viewer{Scoped: true, App: app} }

// Sees reports whether v may see job j (never a nil one).
func (v Viewer) Sees(j *state.Job) bool { return j != nil && v.SeesApp(j.App) }

// SeesApp reports whether v may see the jobs of app.
func (v Viewer) SeesApp(app string) bool { return !v.Scoped || v.App == app }

// SeesFleet reports whether v may see the fleet's numbers — what every
// app's jobs make together: a route's counts, activity, backlog, leases,
// running slots and waiting jobs, the budget levels, a model's sample
// counts. An app's viewer sees its own jobs' numbers through the jobs
// lists and /v1/spend, never the fleet's, which would tell it how much
// the other apps do.
func (v Viewer) SeesFleet() bool { return !v.Scoped }

type viewerKey struct{}

// With is ctx carrying viewer v.
func With(ctx context.Context, v Viewer) context.Context {
	return context.WithValue(ctx, viewerKey{}, v)
}

// From is the viewer ctx carries; Operator when it carries none — a
// caller no front door authenticated: the process itself, or a test.
func From(ctx context.Context) Viewer {
	v, _ := ctx.Value(viewerKey{}).(Viewer)
	return v
}
