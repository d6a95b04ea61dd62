// Package metrics defines Pollux's Prometheus metrics on a registry of its
// own (never the global default) and hands each service the hooks that feed
// them. Labels are bounded: routes are the configured ones, classes and
// states are enums, and nothing is labelled by job id or free-form input.
//
// Every series whose labels are known when the process starts is there
// from the start at zero (see Metrics.Routes), so that a dashboard shows
// its lines and rate() counts the first event; pollux_build_info says which
// build runs (internal/platform/version).
package metrics

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/version"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Metrics is one process's metrics.
type Metrics struct {
	reg *prometheus.Registry
	// spend are the apps' spend (spend.go).
	spend *spendMetrics

	submissions     *prometheus.CounterVec
	providerCalls   *prometheus.HistogramVec
	statusCalls     *prometheus.HistogramVec
	completions     *prometheus.CounterVec
	pollsPerJob     *prometheus.HistogramVec
	finishedPolls   *prometheus.CounterVec
	detectionDelay  *prometheus.HistogramVec
	lateness        *prometheus.HistogramVec
	pauses          *prometheus.CounterVec
	pausedSeconds   *prometheus.CounterVec
	eventsPublished *prometheus.CounterVec
	webhooks        *prometheus.HistogramVec
	webhooksApplied *prometheus.CounterVec
	webhooksDropped *prometheus.CounterVec
	notifyDelivered *prometheus.CounterVec
	notifyCalls     *prometheus.HistogramVec
	notifyOpen      *prometheus.GaugeVec
	custodyOutputs  *prometheus.CounterVec
	custodyBytes    *prometheus.CounterVec
	outputsExpiring *prometheus.CounterVec
	reconciled      *prometheus.CounterVec
	callbackHints   *prometheus.CounterVec
	overrun         *prometheus.HistogramVec
	deadlineCancels *prometheus.CounterVec
	drift           *routeGauges
	webhookMiss     *routeGauges
	webhookLate     *routeGauges
	age             *prometheus.HistogramVec
	orphans         *prometheus.CounterVec
	slotWaits       *prometheus.CounterVec
	slotRepairs     *prometheus.CounterVec
	queueWaiting    *prometheus.GaugeVec
	queueOldest     *prometheus.GaugeVec
	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	outageReads     *prometheus.CounterVec
	unconfirmed     *prometheus.CounterVec
	buildInfo       *prometheus.GaugeVec

	mu     sync.Mutex
	routes []string             // the routes whose series have started (Routes)
	starts []func(route string) // what each service's hooks start per route
}

// New creates the metrics on a fresh registry, with the Go runtime and
// process collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{reg: reg, spend: newSpendMetrics()}

	m.submissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_intake_messages_total",
		Help: "Intake messages handled, by route, kind (submit, track, cancel) and outcome.",
	}, []string{"route", "kind", "outcome"})
	m.providerCalls = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_provider_call_seconds",
		Help:    "Submit, find and cancel calls to providers, by route, operation and result class (budget_busy: held, no budget lease free).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
	}, []string{"route", "op", "class"})
	m.statusCalls = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_status_call_seconds",
		Help:    "Status calls to providers, by route and result class (ok, transient, rate_limited, auth, invalid, not_found; budget_busy: held, no budget lease free).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	}, []string{"route", "class"})
	m.completions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_jobs_terminal_total",
		Help: "Jobs that reached a terminal state, by route, state and how it was detected (poll, webhook, cancel, submit, pollux).",
	}, []string{"route", "state", "detected_by"})
	m.pollsPerJob = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_polls_per_completion",
		Help:    "Status calls a job needed before it reached its terminal state, by route.",
		Buckets: []float64{0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100},
	}, []string{"route"})
	m.finishedPolls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_finished_job_polls_total",
		Help: "Status calls made for jobs that reached their terminal state, by route: exactly the provider's count of them. Divided by pollux_jobs_terminal_total of the completions (state succeeded or failed), polls per completion.",
	}, []string{"route"})
	m.detectionDelay = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_detection_delay_seconds",
		Help:    "Time from a job's completion at the provider (its own timestamp when given) to Pollux detecting it, by route and detection source.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
	}, []string{"route", "detected_by"})
	m.lateness = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_check_lateness_seconds",
		Help:    "How late a check was delivered against its due time, by route.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	}, []string{"route"})
	m.pauses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_route_pauses_total",
		Help: "Route-wide pauses this process started, by route and kind (rate_limit, auth).",
	}, []string{"route", "kind"})
	m.pausedSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_route_paused_seconds_total",
		Help: "Seconds of route pause this process started, by route and kind.",
	}, []string{"route", "kind"})
	m.eventsPublished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_events_published_total",
		Help: "Job events published, by type.",
	}, []string{"type"})
	m.webhooks = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_webhook_requests_seconds",
		Help:    "Webhook deliveries received, by route and HTTP status answered.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 12),
	}, []string{"route", "code"})
	m.webhooksApplied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_webhooks_applied_total",
		Help: "Stored webhook deliveries applied to jobs, by route and whether they changed the job.",
	}, []string{"route", "changed"})

	m.webhooksDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_webhooks_dropped_total",
		Help: "Stored webhook deliveries never applied, by route and reason (mismatch: about another job than its URL names; unknown_job: no job took it within the hold window; unreadable).",
	}, []string{"route", "reason"})

	m.notifyDelivered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_notify_deliveries_total",
		Help: "Outbound webhook delivery attempts by endpoint and outcome (delivered; failed, to be retried; given_up: past the horizon or answered 410; refused: an address Pollux does not call).",
	}, []string{"endpoint", "outcome"})
	m.notifyCalls = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_notify_call_seconds",
		Help:    "Duration of outbound webhook calls, by endpoint.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	}, []string{"endpoint"})
	m.notifyOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pollux_notify_circuit_open",
		Help: "1 while an endpoint's circuit breaker is open (5 failures in a row: its deliveries wait without calling it), by endpoint.",
	}, []string{"endpoint"})

	m.custodyOutputs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_custody_outputs_total",
		Help: "Outputs of succeeded jobs on routes that keep them, by route and outcome (saved; gone: deleted at the provider; too_large: past max_bytes, not kept; failed: given up; retried: a failed download, tried again).",
	}, []string{"route", "outcome"})
	m.custodyBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_custody_bytes_total",
		Help: "Bytes of outputs saved into the outputs bucket, by route.",
	}, []string{"route"})
	m.outputsExpiring = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_outputs_expiring_total",
		Help: "outputs_expiring events: succeeded jobs whose outputs expire at the provider within the lead time, unsaved; kept=\"true\" on routes that keep their outputs (a copy failing, an output too large).",
	}, []string{"route", "kept"})

	m.reconciled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_reconciliation_catches_total",
		Help: "Completions of jobs that expected a webhook but were found by a poll (missing webhooks), by route.",
	}, []string{"route"})
	m.callbackHints = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_callback_hints_total",
		Help: "Provider callbacks and deliveries taken as hints (unsigned, unverifiable, or naming only the job) that brought a job's status check forward, by route.",
	}, []string{"route"})
	m.overrun = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_deadline_overrun_seconds",
		Help:    "How long after its deadline an expired job was expired, by route.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	}, []string{"route"})
	m.drift = newRouteGauges("pollux_learned_drift_ratio",
		"The recent median duration of the route's most drifted model over its learned median (1: no model drifts; a drift begins past 1.5x either way), by route.")
	m.webhookMiss = newRouteGauges("pollux_learned_webhook_miss_ratio",
		"The learned chance that a job's webhook never comes (a poll finds the job ended first), by route; 0 until 50 jobs expecting one are seen. It plans the reconciliation polls of jobs expecting a webhook.")
	m.webhookLate = newRouteGauges("pollux_learned_webhook_lateness_seconds",
		"How late the route's webhooks come after the provider's completion time (their learned 90th percentile), by route.")
	m.deadlineCancels = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_deadline_cancels_total",
		Help: "Provider cancels of jobs expired at their deadline, by route and outcome (canceled, failed, held: paused or no budget, off: the route's cancel_on_deadline is false, unsupported: the provider cannot cancel).",
	}, []string{"route", "outcome"})
	m.age = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_unresolved_age_seconds",
		Help:    "Age of unfinished jobs when their checks come due (one observation per check), by route.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 18),
	}, []string{"route"})

	m.orphans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_orphans_removed_total",
		Help: "Messages a work-queue stream kept after they were acknowledged (left by a NATS server shutdown) that this process removed, by stream (intake, checks, webhooks).",
	}, []string{"stream"})

	m.slotWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_running_waits_total",
		Help: "Submissions that found a budget level's running slots all taken and went back to wait in JetStream, by level (\"account x\", \"route y\", \"global\").",
	}, []string{"level"})
	m.queueWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pollux_waiting_jobs",
		Help: "Jobs waiting in an admission queue for running slots, by queue (a budget scope: account~<name> or a route), as this ingest process last saw it.",
	}, []string{"queue"})
	m.queueOldest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pollux_waiting_oldest_seconds",
		Help: "How long the oldest job waiting in an admission queue has waited, by queue.",
	}, []string{"queue"})
	m.slotRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_running_repairs_total",
		Help: "Running slots no job held (left by a process that died) that the repair freed, by level.",
	}, []string{"level"})

	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_http_requests_total",
		Help: "Requests the HTTP front door answered, by the pattern that serves them (a face's mount for a face), method and status (refusals included).",
	}, []string{"handler", "method", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pollux_http_request_duration_seconds",
		Help:    "How long the HTTP front door took to answer, by pattern and method (an event stream: its whole life; a create held by Prefer: wait: its hold).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"handler", "method"})

	m.outageReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_face_outage_reads_total",
		Help: "A face's reads of a job's record made while NATS was unavailable, by whether the front door knew the job (its last record read, which a poll is answered from) or not (a 503).",
	}, []string{"known"})
	m.unconfirmed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollux_http_creates_unconfirmed_total",
		Help: "Creates the front door answered 503 while NATS had not confirmed their submission, by route and how each was settled: withdrawn (its job ended before ingest took it), canceled (ingest had taken it), ended (it had ended: a job no app holds an id for), abandoned (the front door stopped first).",
	}, []string{"route", "outcome"})
	m.outageReads.WithLabelValues("true")
	m.outageReads.WithLabelValues("false")

	m.buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pollux_build_info",
		Help: "Always 1: the version, revision and Go version of the running binary (--version).",
	}, []string{"version", "revision", "goversion"})
	bi := version.Get()
	m.buildInfo.WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)
	for _, typ := range events.EventTypes {
		m.eventsPublished.WithLabelValues(typ)
	}

	for _, c := range m.Collectors() {
		f(c)
	}
	return m
}

// Collectors lists Pollux's own collectors (the runtime's excepted).
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.submissions, m.providerCalls, m.statusCalls, m.completions,
		m.pollsPerJob, m.finishedPolls, m.detectionDelay, m.lateness, m.pauses, m.pausedSeconds, m.eventsPublished,
		m.webhooks, m.webhooksApplied, m.webhooksDropped, m.notifyDelivered, m.notifyCalls, m.notifyOpen, m.custodyOutputs, m.custodyBytes, m.outputsExpiring, m.reconciled, m.callbackHints, m.overrun, m.deadlineCancels, m.drift, m.webhookMiss, m.webhookLate, m.age, m.orphans,
		m.slotWaits, m.slotRepairs, m.queueWaiting, m.queueOldest, m.httpRequests, m.httpDuration, m.outageReads, m.unconfirmed, m.buildInfo,
		m.spend.cost, m.spend.budgets, m.spend.limits}
}

// The label values known in advance, for the series Routes starts.
var (
	// terminalStates are the states pollux_jobs_terminal_total counts.
	terminalStates = slices.DeleteFunc(slices.Clone(state.States), func(s state.State) bool { return !s.Terminal() })
	// sources are the ways a job's end is detected (state.Source).
	sources = []state.Source{state.FromSubmit, state.FromPoll, state.FromWebhook, state.FromCancel, state.FromPollux, state.FromHedge}
	// pauseKinds are route.Pauses' kinds.
	pauseKinds = []string{route.PauseRateLimit, route.PauseAuth}
	// callClasses are the result classes of a provider call: "ok" or a
	// provider.Class.
	callClasses = []string{"ok", provider.Transient.String(), provider.RateLimited.String(),
		provider.Auth.String(), provider.Invalid.String(), provider.NotFound.String()}
	// callOps are the provider calls other than status (Metrics.Gate).
	callOps = []string{"submit", "find", "cancel"}
	// dropReasons are webhook.Metrics.Dropped's reasons.
	dropReasons = []string{"mismatch", "unknown_job", "unreadable"}
)

// Drift exports pollux_learned_drift_ratio{route}: at each scrape, fn's
// answer, the recent median duration of the route's most drifted model
// over its learned median (1: none drifts; see package learn). A route's
// later call replaces its fn.
func (m *Metrics) Drift(route string, fn func() float64) { m.drift.set(route, fn) }

// Webhooks exports pollux_learned_webhook_miss_ratio{route} and
// pollux_learned_webhook_lateness_seconds{route}: at each scrape, fn's
// answer, the route's learned webhook miss chance and lateness (see
// package learn). A route's later call replaces its fn.
func (m *Metrics) Webhooks(route string, fn func() (miss float64, late time.Duration)) {
	m.webhookMiss.set(route, func() float64 { miss, _ := fn(); return miss })
	m.webhookLate.set(route, func() float64 { _, late := fn(); return late.Seconds() })
}

// routeGauges is a gauge a route, each read from its function at each
// scrape.
type routeGauges struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	fns  map[string]func() float64
}

func newRouteGauges(name, help string) *routeGauges {
	return &routeGauges{fns: map[string]func() float64{}, desc: prometheus.NewDesc(name, help, []string{"route"}, nil)}
}

func (g *routeGauges) set(route string, fn func() float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fns[route] = fn
}

func (g *routeGauges) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *routeGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for route, fn := range g.fns {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, fn(), route)
	}
}

// Routes starts at zero, for each named route, every series whose other
// labels are a known set, so that a dashboard has its lines before the
// first event and rate() counts that event. app.Open passes the process's
// configured routes. It starts what any process counts (job ends, polls,
// detection delays, reconciliation catches, deadline overruns, route
// pauses), and the series of each service whose hooks the process took
// (Ingest, Poller, Webhook), whichever of the two comes first. Series
// labelled by what only an event tells (an HTTP status, an intake outcome,
// a budget level, an admission queue) still appear with their first event.
// A route already started is skipped.
func (m *Metrics) Routes(names ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range names {
		if slices.Contains(m.routes, r) {
			continue
		}
		m.routes = append(m.routes, r)
		m.startRoute(r)
		for _, start := range m.starts {
			start(r)
		}
	}
}

// startRoute starts the series any process may feed for route r: what the
// jobs' owner reports of a job's end, and the route pauses.
func (m *Metrics) startRoute(r string) {
	for _, st := range terminalStates {
		for _, src := range sources {
			m.completions.WithLabelValues(r, string(st), string(src))
		}
	}
	for _, src := range sources {
		m.detectionDelay.WithLabelValues(r, string(src))
	}
	m.pollsPerJob.WithLabelValues(r)
	m.finishedPolls.WithLabelValues(r)
	m.reconciled.WithLabelValues(r)
	m.overrun.WithLabelValues(r)
	for _, k := range pauseKinds {
		m.pauses.WithLabelValues(r, k)
		m.pausedSeconds.WithLabelValues(r, k)
	}
}

// serviceStarts records what one service's hooks start per route, and
// starts it for the routes already known.
func (m *Metrics) serviceStarts(start func(route string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.starts = append(m.starts, start)
	for _, r := range m.routes {
		start(r)
	}
}

// Registry returns the registry.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// terminal records a job that reached its terminal state.
func (m *Metrics) terminal(j *state.Job) {
	m.completions.WithLabelValues(j.Route, string(j.State), string(j.DetectedBy)).Inc()
	m.pollsPerJob.WithLabelValues(j.Route).Observe(float64(j.Polls))
	m.finishedPolls.WithLabelValues(j.Route).Add(float64(j.Polls))
	switch j.State {
	case state.Succeeded, state.Failed, state.Canceled:
		if !j.CompletedAt.IsZero() && !j.DetectedAt.IsZero() {
			m.detectionDelay.WithLabelValues(j.Route, string(j.DetectedBy)).Observe(max(j.DetectedAt.Sub(j.CompletedAt).Seconds(), 0))
		}
		if j.WebhookExpected && j.DetectedBy == state.FromPoll {
			m.reconciled.WithLabelValues(j.Route).Inc()
		}
	case state.Expired:
		if !j.Deadline.IsZero() && !j.DetectedAt.IsZero() {
			m.overrun.WithLabelValues(j.Route).Observe(max(j.DetectedAt.Sub(j.Deadline).Seconds(), 0))
		}
	}
}

// Paused records a route pause this process started (route.Pauses.Started).
func (m *Metrics) Paused(route, kind string, d time.Duration) {
	m.pauses.WithLabelValues(route, kind).Inc()
	m.pausedSeconds.WithLabelValues(route, kind).Add(d.Seconds())
}

// LatePolls records polls counted into a job after it finished (jobs.Hooks).
func (m *Metrics) LatePolls(route string, n int) {
	m.finishedPolls.WithLabelValues(route).Add(float64(n))
}

// Published records an event published.
func (m *Metrics) Published(_, typ string) { m.eventsPublished.WithLabelValues(typ).Inc() }

// Terminal records a job that reached its terminal state.
func (m *Metrics) Terminal(j *state.Job) { m.terminal(j) }
