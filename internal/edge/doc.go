// Package edge groups what faces users and operators: the HTTP front door
// and its API (frontdoor), the console's pages (console), and the read
// models they answer from — the jobs index built from the events stream
// (index), the census of routes and budgets (census) and the efficiency
// figures of pollux stats (report).
//
// The edge publishes intake messages and reads records through the job
// core; it runs no service: it never imports ingest, poller, webhook or
// custody (it reads notify's delivery log), nor the wiring or the tools
// (.golangci.yml: edge-imports-no-service).
package edge
