// Package route owns a route: one configured provider account — its
// adapter, schedule policy and limits (route.go), its fleet-wide pauses
// (pauses.go, operator.go), its budgets at every level and its running
// caps, fixed or learned (the sub-package budget, which only this
// package and the processes' wiring use) — and the one gate every call
// to its provider goes through (gate.go). Model routes, which choose
// among routes, are here too (model.go).
//
// # The gate
//
// A provider call is one sequence, written once, in Gate.Call:
//
//	hold while the route is paused ─► a lease at every budget level
//	(narrowest first; none free: held, busy) ─► hold again (paused while the
//	leases were awaited: they go back unused) ─► Ready (the caller
//	records what it is about to do; it may decline) ─► the call, within
//	the route's timeout ─► the leases back with what the answer teaches
//	(a refusal lowers a learned rate) ─► observed ─► Pauses.After (a
//	rate limit or refused credentials pause the route for the fleet) ─►
//	for a create, the learned running caps move (lowered by a refusal
//	about jobs running at once, raised slowly by creates accepted).
//
// It returns the provider's answer — its status, or its error, which
// callers classify (provider.ClassOf) — or, for a call it did not make,
// an error that carries why: a *HeldError (errors.As) when the route is
// paused or the budget had no lease free, with how long to wait; Ready's
// error wrapped with ErrDeclined when the caller declined. A find that
// found nothing answers ErrNoSuchJob. Each call made is observed
// (GateConfig.Observe) and, with tracing on, a span (trace.go). The
// services — ingest's creates, finds and cancels, the poller's status
// calls and cancels — never call an adapter themselves: lint (forbidigo
// in .golangci.yml) refuses a call of provider.Adapter's or
// provider.Finder's methods outside gate.go, and depguard refuses the
// budget package to the services.
// Running slots are the gate's too: Gate.Take and Gate.Free, and
// Gates.Repair frees those no job holds.
//
// A process has one set of gates over one pool of leases (NewGates,
// built once by package app beside the pauses and the jobs' owner, and
// handed to every service the process runs): a budget shared by several
// routes (an account's, the global one) is one budget in the process,
// and each route's chains are built once — its status budgets by Open,
// its submit budgets and running slots by OpenSubmit (ingest's).
package route
