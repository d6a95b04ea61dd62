package dev_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// tracedStack runs a stack whose spans an in-memory exporter records,
// over a simulated provider whose jobs take about a second, polled often.
func tracedStack(t *testing.T, webhooks bool) (*dev.Stack, jetstream.JetStream, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	st, js := startStack(t, dev.StackConfig{
		Sim: sim.Config{Seed: 21, TimeScale: 1,
			Default: sim.Model{QueueMedian: sim.Duration(100 * time.Millisecond), RunMedian: sim.Duration(time.Second)}},
		Route:      config.Route{Poll: config.Poll{MinDelay: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond}},
		NoWebhooks: !webhooks,
		Tracer:     tracing.New(tp),
	})
	return st, js, exp
}

// submitterSpan is a span of the submitting application, traced with its
// own SDK.
func submitterSpan(t *testing.T, name string) trace.Span {
	t.Helper()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, span := tp.Tracer("app").Start(context.Background(), name)
	t.Cleanup(func() { span.End() })
	return span
}

func traceparent(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// waitFinished waits until every job is terminal and returns their
// records.
func waitFinished(t *testing.T, st *dev.Stack, ids ...string) map[string]*state.Job {
	t.Helper()
	ctx := context.Background()
	out := map[string]*state.Job{}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			j, err := st.Env.Jobs.Get(ctx, id)
			if err != nil || !j.State.Terminal() {
				return false
			}
			out[id] = j
		}
		return true
	}, time.Minute, 50*time.Millisecond, "every job ends")
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// about returns the spans about job id, by name.
func about(exp *tracetest.InMemoryExporter, id string) map[string][]tracetest.SpanStub {
	out := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if attr(s, "pollux.job.id").AsString() == id {
			out[s.Name] = append(out[s.Name], s)
		}
	}
	return out
}

// waitSpan waits until job id has a span named name, and returns the
// job's spans.
func waitSpan(t *testing.T, exp *tracetest.InMemoryExporter, id, name string) map[string][]tracetest.SpanStub {
	t.Helper()
	require.Eventually(t, func() bool { return len(about(exp, id)[name]) > 0 }, 10*time.Second, 20*time.Millisecond,
		"job %s has a %q span", id, name)
	return about(exp, id)
}

// One trace per job: the submitter's span (its traceparent on the intake
// message's NATS headers, in either spelling) is the parent of the intake
// span; the submit call, every poll and every event, the terminal one
// included, are in the same trace; and the events carry its context to
// their subscribers.
func TestOneTracePerJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, js, exp := tracedStack(t, false)
	keys := []string{"traceparent", "Traceparent", "TRACEPARENT"}
	parents := map[string]trace.Span{}
	var ids []string
	for i, key := range keys {
		idem := fmt.Sprintf("traced-%d", i)
		id := events.KeyID(dev.RouteName, idem)
		parents[id] = submitterSpan(t, "render "+idem)
		ids = append(ids, id)
		b, err := json.Marshal(events.Submit{V: events.Version, IdempotencyKey: idem, Model: "m/model", Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		_, err = js.PublishMsg(ctx, &nats.Msg{Subject: st.Env.NS.Submit(dev.RouteName), Data: b,
			Header: nats.Header{key: {traceparent(parents[id].SpanContext())}}})
		require.NoError(t, err)
	}
	jobs := waitFinished(t, st, ids...)
	traces := map[trace.TraceID]bool{}
	for _, id := range ids {
		j, parent := jobs[id], parents[id].SpanContext()
		require.Equal(t, state.Succeeded, j.State, "job %s: %s", id, j.Reason)
		spans := waitSpan(t, exp, id, "event "+events.EventSucceeded)
		traces[parent.TraceID()] = true

		for name, ss := range spans {
			for _, s := range ss {
				require.Equal(t, parent.TraceID(), s.SpanContext.TraceID(), "job %s: span %q is in the submitter's trace", id, name)
			}
		}
		require.Len(t, spans["intake submit"], 1)
		intake := spans["intake submit"][0]
		require.Equal(t, parent.SpanID(), intake.Parent.SpanID(), "the submitter's span is the intake span's parent")
		require.Equal(t, trace.SpanKindConsumer, intake.SpanKind)
		require.Equal(t, "submitted", attr(intake, "pollux.outcome").AsString())
		require.Equal(t, traceparent(intake.SpanContext), j.Trace, "the record keeps the intake span's context")

		require.Len(t, spans["provider submit"], 1)
		submit := spans["provider submit"][0]
		require.Equal(t, intake.SpanContext.SpanID(), submit.Parent.SpanID())
		require.Equal(t, j.RemoteID, attr(submit, "pollux.remote_id").AsString())

		polls := spans["poll"]
		require.NotEmpty(t, polls)
		require.Len(t, polls, j.Polls, "a span for each poll")
		for _, p := range polls {
			require.Equal(t, intake.SpanContext.SpanID(), p.Parent.SpanID(), "a poll is a child of the job's trace context")
			require.Equal(t, j.RemoteID, attr(p, "pollux.remote_id").AsString())
		}
		last := slices.MaxFunc(polls, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		require.Equal(t, string(state.Succeeded), attr(last, "pollux.state").AsString())

		done := spans["event "+events.EventSucceeded]
		require.Len(t, done, 1)
		require.True(t, attr(done[0], "pollux.terminal").AsBool())
		require.Equal(t, last.SpanContext.SpanID(), done[0].Parent.SpanID(), "the poll that saw the end published it")
		require.Len(t, spans["event "+events.EventSubmitted], 1)

		// A subscriber continues the trace from the event's headers.
		m, err := st.Env.Res.Events.GetLastMsgForSubject(ctx, st.Env.NS.Event(dev.RouteName, id))
		require.NoError(t, err)
		require.Equal(t, traceparent(done[0].SpanContext), m.Header.Get(tracing.Header))
	}
	require.Len(t, traces, len(ids), "one trace per job")
}

// A request to the front door with a traceparent header: the front door's
// span is its child, and puts its own context on the intake message, so
// the job's trace descends from the caller's.
func TestFrontDoorTraceparent(t *testing.T) {
	t.Parallel()
	st, _, exp := tracedStack(t, false)
	parent := submitterSpan(t, "checkout").SpanContext()
	body := `{"v":1,"route":"` + dev.RouteName + `","model":"m/model","input":{},"idempotency_key":"fd-traced"}`
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, st.HTTPURL+"/v1/jobs", bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent(parent))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	id := events.KeyID(dev.RouteName, "fd-traced")
	j := waitFinished(t, st, id)[id]
	require.Equal(t, state.Succeeded, j.State, j.Reason)
	spans := waitSpan(t, exp, id, "event "+events.EventSucceeded)
	require.Len(t, spans["POST /v1/jobs"], 1)
	fd := spans["POST /v1/jobs"][0]
	require.Equal(t, trace.SpanKindServer, fd.SpanKind)
	require.Equal(t, parent.TraceID(), fd.SpanContext.TraceID())
	require.Equal(t, parent.SpanID(), fd.Parent.SpanID(), "the caller's span is the front door's parent")
	require.Len(t, spans["intake submit"], 1)
	intake := spans["intake submit"][0]
	require.Equal(t, fd.SpanContext.SpanID(), intake.Parent.SpanID(), "the intake message carried the front door's context")
	for name, ss := range spans {
		for _, s := range ss {
			require.Equal(t, parent.TraceID(), s.SpanContext.TraceID(), "span %q", name)
		}
	}
	require.NotEmpty(t, spans["poll"])
}

// A webhook's receipt is a trace of its own, and its application a span
// of the job's trace, linked to the receipt; the end it brings is
// published in the job's trace.
func TestWebhookSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, js, exp := tracedStack(t, true)
	parent := submitterSpan(t, "render").SpanContext()
	b, err := json.Marshal(events.Submit{V: events.Version, IdempotencyKey: "hooked", Model: "m/model", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = js.PublishMsg(ctx, &nats.Msg{Subject: st.Env.NS.Submit(dev.RouteName), Data: b,
		Header: nats.Header{tracing.Header: {traceparent(parent)}}})
	require.NoError(t, err)
	id := events.KeyID(dev.RouteName, "hooked")
	j := waitFinished(t, st, id)[id]
	require.Equal(t, state.Succeeded, j.State, j.Reason)
	require.Equal(t, state.FromWebhook, j.DetectedBy, "the webhook saw the end")

	spans := waitSpan(t, exp, id, "webhook apply")
	var receipts []tracetest.SpanStub
	for _, r := range spans["webhook receive"] {
		require.False(t, r.Parent.IsValid(), "a receipt is a trace of its own")
		require.NotEqual(t, parent.TraceID(), r.SpanContext.TraceID())
		require.Equal(t, int64(http.StatusOK), attr(r, "http.response.status_code").AsInt64())
		receipts = append(receipts, r)
	}
	require.NotEmpty(t, receipts)
	var ended bool
	for _, a := range spans["webhook apply"] {
		require.Equal(t, parent.TraceID(), a.SpanContext.TraceID(), "applied in the job's trace")
		require.Len(t, a.Links, 1)
		require.True(t, slices.ContainsFunc(receipts, func(r tracetest.SpanStub) bool {
			return r.SpanContext.SpanID() == a.Links[0].SpanContext.SpanID()
		}), "linked to its receipt")
		ended = ended || attr(a, "pollux.state").AsString() == string(state.Succeeded)
	}
	require.True(t, ended, "the delivery that ended the job")
	spans = waitSpan(t, exp, id, "event "+events.EventSucceeded)
	require.Equal(t, parent.TraceID(), spans["event "+events.EventSucceeded][0].SpanContext.TraceID())
}

// A job whose record has no trace context — created before tracing was
// on — is polled to its end as any other: each poll is a root span of its
// own, and the events it publishes are its children.
func TestJobWithoutTraceContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, exp := tracedStack(t, false)
	direct, err := replicate.New(provider.Config{Route: "direct", Kind: replicate.Kind, BaseURL: st.SimURL, Token: st.SimToken})
	require.NoError(t, err)
	created, err := direct.Submit(ctx, provider.SubmitRequest{JobID: "x", Model: "m/model", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	now := time.Now().UTC()
	j := &state.Job{ID: "untraced", Route: dev.RouteName, Model: "m/model", RemoteID: created.RemoteID, State: state.Queued,
		Tracked: true, CreatedAt: now, SubmittedAt: now, ChangedAt: now, Deadline: now.Add(10 * time.Minute), NextCheckAt: now}
	j.Record(events.EventSubmitted, now)
	// As a process without tracing stored it: no span, no trace context.
	rec, createdJob, err := st.Env.Jobs.Intake().Accept(ctx, j)
	require.NoError(t, err)
	require.True(t, createdJob)
	require.Empty(t, rec.Trace)

	final := waitFinished(t, st, "untraced")["untraced"]
	require.Equal(t, state.Succeeded, final.State, final.Reason)
	require.Empty(t, final.Trace, "no trace context is made up later")
	spans := waitSpan(t, exp, "untraced", "event "+events.EventSucceeded)
	polls := spans["poll"]
	require.Len(t, polls, final.Polls)
	seen := map[trace.TraceID]bool{}
	for _, p := range polls {
		require.False(t, p.Parent.IsValid(), "a root span")
		seen[p.SpanContext.TraceID()] = true
	}
	require.Len(t, seen, len(polls), "a trace of its own for each poll")
	done := spans["event "+events.EventSucceeded][0]
	require.True(t, slices.ContainsFunc(polls, func(p tracetest.SpanStub) bool { return p.SpanContext.SpanID() == done.Parent.SpanID() }),
		"the end is published under the poll that saw it")
}
