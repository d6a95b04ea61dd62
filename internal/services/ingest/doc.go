// Package ingest is cmd/ingest's service: it consumes the intake subjects of
// every configured route (one durable consumer per route, so a slow or
// paused route never holds up another), submits jobs to providers exactly
// once, starts tracking jobs submitted elsewhere, cancels jobs, and rejects
// bad requests with an event that names the problem. Intake on routes that
// no process serves is swept up and rejected too.
//
// Ingest decides (decide.go: what a submission needs next, what a failed
// call means, how a submission in doubt is resolved) and hands what it
// decided to the jobs' owner (package jobs), which alone writes a job.
// A submission's record is created with its first attempt marked, just
// before the call, so a process that dies during the call leaves the
// attempt in doubt; the provider's answer, once in hand, is recorded
// however long NATS is away.
//
// The files, in the order a submission meets them: ingest.go (the
// service, its intake consumers and dispatch), submit.go (a submission's
// first step, which builds its job, and the wait step, which queues it),
// pipeline.go (the loop over the steps nextStep names: no step calls
// another), attempt.go (the submit step, its answer recorded or its
// failure carried out), doubt.go (a create with no answer), underway.go
// (one handling of a job at a time in a process), hold.go (the held step:
// a paused route's submissions), queue.go (the admission queue of routes
// with running caps), model.go (model routes and hedges), track.go,
// cancel.go, sweep.go (unserved intake, slot repair), trace.go.
//
// Ingest never calls a provider itself: every create, find and cancel
// goes through the route's gate (route.Gate.Call) — one of the process's
// gates, which it is handed (package app builds them) — which holds it
// while the route is paused, takes the leases of every budget level, makes
// the call within the route's timeout, and pauses the route on the
// answer's say. A call not made is an error that says why
// (route.HeldError: the message comes back when the wait is over). Running
// slots are the gate's too (route.Gate.Take).
//
// With tracing on (package tracing), handling an intake message is a span,
// a child of the submitter's span when the message's traceparent header
// names one, and the job created in it takes its context as the job's
// trace; each provider call is the gate's span in that trace (trace.go).
package ingest
