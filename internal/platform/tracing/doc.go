// Package tracing is Pollux's OpenTelemetry tracing: one trace per job,
// from the submitter's span to the job's terminal event, across every
// process that touches the job, with the W3C trace context carried in
// NATS headers.
//
// # Off by default, and free when off
//
// A *Tracer is nil when tracing is off (New of a nil or no-op provider,
// Setup without an endpoint), and every method of a nil *Tracer returns
// at once: the code paths allocate no span and read or write no header
// beyond that nil check (TestOffAllocatesNothing; `make bench` reports the
// poller's check cycles with tracing off and on).
//
// # Where a job's trace context lives
//
// In the job's record (state.Job.Trace, a W3C traceparent) and in its
// poll state (events.PollState.Trace), which every check message
// carries. The owner of the jobs (package jobs) stores it when it creates
// the record: the context of the span the creation ran in, the intake
// span. From then on every process that touches the job — the poller an
// hour later, the webhook applier, a resubmission after a crash — starts
// its spans as children of that context, whether or not the submitter
// traced: Start takes the job's traceparent. The poll state, not a
// header of the check message, carries it because every publisher of a
// check builds it from a record or a poll state (the first check, a
// replacement, a postponed check, a quiet poll of a webhook job): none
// can drop it. A job created while tracing was off has no trace context;
// its later spans are roots of traces of their own.
//
// # Spans
//
//	POST /v1/jobs, POST /v1/jobs/track   server    the front door; parent: the request's traceparent
//	intake submit|track|cancel           consumer  ingest; parent: the intake message's traceparent header
//	provider submit                      client    the create call, child of the job's trace
//	poll                                 client    each status call, child of the job's trace
//	webhook receive                      server    a provider's delivery (a trace of its own)
//	webhook apply                        consumer  the delivery applied, child of the job's trace, linked to its receipt
//	event <type>                         producer  each event published (submitted … succeeded)
//
// Their attributes use the pollux.* namespace (pollux.route,
// pollux.job.id, pollux.remote_id, pollux.model, pollux.state,
// pollux.poll, pollux.changed, pollux.outcome, pollux.event.type …) with
// error.type (the provider's error class) on a failed call.
//
// # Headers
//
// The front door puts the context of its span on the intake message it
// publishes, ingest reads the intake message's, every event is published
// with the context of its span, and a stored webhook delivery carries
// its receipt's (replacing any the provider sent), all as a
// "traceparent" (and "tracestate") header, read case-insensitively.
//
// # Configuration
//
// Setup turns the binaries' --otlp-endpoint (OTEL_EXPORTER_OTLP_ENDPOINT)
// into an OTLP/HTTP exporter; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT turns it
// on too, and the SDK honours the other standard variables (headers,
// timeout, compression, certificates, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_BSP_*).
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off.
package tracing
