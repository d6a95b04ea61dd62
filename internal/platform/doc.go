// Package platform groups the plumbing every part of Pollux stands on and
// that knows nothing of jobs: the config file (config), the embedded NATS
// server (embedded), HTTP serving and its problem responses (httpserve,
// problem), the SSRF-safe outbound client (safehttp), tracing, the
// build's version, and the crash points the fault tests arm (faultpoint:
// compiled to nothing without the faultpoints build tag, so shipped code
// marks them without importing test support).
//
// Its packages import the standard library, third-party modules, pkg/*
// and each other — never the job core, the services, the edge, the
// wiring or the tools (.golangci.yml: platform-imports-no-part).
package platform
