// Package core groups the job core: the one owner of every job's record,
// outbox, check message and counters (jobs), the route and its gate — the
// one way to call a provider, with its pauses, budgets and running caps
// (route, route/budget) — the learned durations and end shares shared
// fleet-wide (learn), and the JetStream consumer loop the services run on
// (consume).
//
// It imports pkg/*, the platform and itself — never the services, the
// edge, the wiring or the tools (.golangci.yml: core-imports-no-service).
package core
