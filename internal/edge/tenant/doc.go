// Package tenant owns the one decision of which jobs a caller may see
// when one Pollux serves several applications (apps): a Viewer is what a
// request may see — every app's jobs (an operator, a front door without
// tokens), or one app's only — and Viewer.Sees is the only test of it.
// The front door puts the request's Viewer in its context (With) once it
// knows who asks; every place that answers about a job asks the context
// (From): the front door's own endpoints, the jobs index's queries
// (index.Query.Viewer), the faces' kit (face.Kit.Job and List). A job a
// Viewer may not see is answered exactly as an unknown id is.
package tenant
