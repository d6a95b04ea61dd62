package events_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/internal/services/webhook"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The contract test: api/schemas (JSON Schema) and api/asyncapi.yaml say
// what the Go types of this package do. Go values of every message type
// validate against their schemas, every schema example decodes with the Go
// decoders, invalid messages are refused by both, and the field lists,
// required fields, enums and limits agree.

const apiDir = "../../api"

// contract pairs a schema with its Go type and decoder.
type contract struct {
	schema string
	goType reflect.Type
	// decode is the Go decoder the schema's messages go through.
	decode func([]byte) error
	// internal are Go fields the schema leaves out on purpose.
	internal []string
}

var contracts = []contract{
	{"submit.json", reflect.TypeFor[events.Submit](), decodeWith(events.DecodeSubmit), nil},
	{"track.json", reflect.TypeFor[events.Track](), decodeWith(events.DecodeTrack), nil},
	{"cancel.json", reflect.TypeFor[events.Cancel](), decodeWith(events.DecodeCancel), nil},
	{"event.json", reflect.TypeFor[events.Event](), decodeWith(events.DecodeEvent), nil},
	{"rejection.json", reflect.TypeFor[events.Rejection](), strictly[events.Rejection], nil},
	{"route-event.json", reflect.TypeFor[events.RouteEvent](), decodeWith(events.DecodeRouteEvent), nil},
	{"drift.json", reflect.TypeFor[events.Drift](), strictly[events.Drift], nil},
	// A snapshot leaves out the submission input, the outbox and the trace
	// context.
	{"job.json", reflect.TypeFor[state.Job](), decodeWith(state.Decode), []string{"input", "keep_input", "outbox", "trace"}},
}

func decodeWith[T any](fn func([]byte) (*T, error)) func([]byte) error {
	return func(b []byte) error {
		_, err := fn(b)
		return err
	}
}

// strictly decodes into T refusing unknown fields, so a schema example
// cannot use a field the Go type lacks.
func strictly[T any](b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v T
	return dec.Decode(&v)
}

// schemaBase is where the schemas' $ids place them: each is schemaBase
// and its file name.
const schemaBase = "https://raw.githubusercontent.com/pollux-dev/pollux/main/api/schemas/"

// schemas compiles every schema of api/schemas as a validator that knows
// them only by their $ids does: each is loaded under its $id, nothing is
// fetched, and the cross-file $refs resolve through the $ids.
func schemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	files, err := filepath.Glob(filepath.Join(apiDir, "schemas", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	ids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		require.NoError(t, err, f)
		id, _ := doc.(map[string]any)["$id"].(string)
		require.Equal(t, schemaBase+filepath.Base(f), id, "%s: its $id", f)
		require.NoError(t, c.AddResource(id, doc), f)
		ids[filepath.Base(f)] = id
	}
	out := map[string]*jsonschema.Schema{}
	for name, id := range ids {
		s, err := c.Compile(id)
		require.NoError(t, err, name)
		out[name] = s
	}
	return out
}

// noLoader refuses to load anything: every schema is added by its $id.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is not one of the schemas' $ids", url)
}

// document reads a schema file as generic JSON.
func document(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(apiDir, "schemas", name))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc), name)
	return doc
}

func validate(t *testing.T, s *jsonschema.Schema, data []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	require.NoError(t, err)
	return s.Validate(v)
}

// goExamples are Go values of every message type with every field set.
func goExamples() map[string][]any {
	at := time.Date(2026, 11, 29, 15, 4, 5, 120_000_000, time.UTC)
	yes := true
	progress, position := 0.5, 3
	job := &state.Job{
		ID: "k-6bqfmzxxc3o2kqyg5kaxwzgu4e", Route: "replicate", Model: "minimax/video-01", ConfigKey: "720p",
		RemoteID: "ufawqhfynnddngldkgtslldrkq", ProviderRef: json.RawMessage(`{"model":"minimax/video-01"}`),
		State: state.Succeeded, ProviderStatus: "succeeded", Reason: "done", Progress: &progress, QueuePosition: &position,
		Input: json.RawMessage(`{"prompt":"x"}`), Metadata: map[string]string{"user": "u-1"}, IdempotencyKey: "order-42",
		Tracked: true, IntakeSeq: 118, SubmitAttempts: 1, SubmitInDoubt: true,
		CreatedAt: at, SubmittedAt: at, StartedAt: at, CompletedAt: at, DetectedAt: at, DetectedBy: state.FromWebhook,
		Deadline: at.Add(time.Hour), ExpectedDuration: state.Duration(90 * time.Second), WebhookExpected: true,
		CancelRequestedAt: at, Polls: 2, Webhooks: 1, LastPolledAt: at, ChangedAt: at, NextCheckAt: at,
		Unchanged: 1, Errors: 1, NotFound: 1, LastError: "503", Outputs: []string{"https://example.com/out.mp4"},
		OutputsExpireAt: at.Add(time.Hour), Late: &state.Late{State: state.Failed, Raw: "failed", At: at, Source: state.FromPoll},
		EventSeq: 4, Outbox: []state.OutboxEvent{{Seq: 4, Type: "succeeded", State: state.Succeeded, At: at}}, UpdatedAt: at,
	}
	rejection := &events.Rejection{Kind: events.KindSubmit, Subject: "pollux.submit.replicate", IntakeSeq: 118, Field: "model", Error: "model: required"}
	return map[string][]any{
		"submit.json": {
			events.Submit{V: 1, ID: "clip-1", IdempotencyKey: "order-42", Model: "minimax/video-01", Input: json.RawMessage(`{"prompt":"a kite"}`),
				Deadline: at, ExpectedDurationS: 90, Webhook: &yes, ConfigKey: "720p-8s", Metadata: map[string]string{"user": "u-1"}},
			events.Submit{V: 1, Model: "m", Input: json.RawMessage(`{}`), TimeoutS: 1800},
		},
		"track.json": {
			events.Track{V: 1, ID: "clip-2", RemoteID: "ufawqhfynnddngldkgtslldrkq", Model: "minimax/video-01", Deadline: at,
				ExpectedDurationS: 60, Webhook: &yes, ConfigKey: "hd", Metadata: map[string]string{"user": "u-1"}},
			events.Track{V: 1, RemoteID: "r1", Model: "m", TimeoutS: 60},
		},
		"cancel.json":    {events.Cancel{V: 1, ID: "clip-1", Reason: "user left"}},
		"job.json":       {job.Snapshot(), &state.Job{ID: "j", Route: "r", Model: "m", State: state.Pending}},
		"rejection.json": {rejection},
		"route-event.json": {
			events.RouteEvent{V: 1, Type: events.EventRoutePaused, Time: at, Route: "replicate", By: "alice", Reason: "incident", Until: at.Add(time.Hour)},
			events.RouteEvent{V: 1, Type: events.EventRouteResumed, Time: at, Route: "replicate", By: "bob"},
			events.RouteEvent{V: 1, Type: events.EventModelDrift, Time: at, Route: "kling", By: "pollux", Reason: "slower",
				Drift: &events.Drift{Model: "kling-v2", ConfigKey: "1080p", Ratio: 1.8, LearnedP50: 90, RecentP50: 162, RecentJobs: 16}},
		},
		"event.json": {
			events.NewEvent(job, job.Outbox[0]),
			&events.Event{V: 1, Type: events.EventRejected, Time: at, Route: "replicate", JobID: "_", Rejection: rejection},
		},
	}
}

func TestGoValuesMatchSchemas(t *testing.T) {
	t.Parallel()
	all := schemas(t)
	for name, values := range goExamples() {
		for i, v := range values {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			require.NoError(t, validate(t, all[name], b), "%s example %d: %s", name, i, b)
		}
	}
}

func TestSchemaExamplesDecode(t *testing.T) {
	t.Parallel()
	all := schemas(t)
	for _, c := range contracts {
		examples, _ := document(t, c.schema)["examples"].([]any)
		require.NotEmpty(t, examples, "%s has examples", c.schema)
		for i, ex := range examples {
			b, err := json.Marshal(ex)
			require.NoError(t, err)
			require.NoError(t, validate(t, all[c.schema], b), "%s example %d is valid", c.schema, i)
			require.NoError(t, c.decode(b), "%s example %d decodes with the Go decoder", c.schema, i)
			require.NoError(t, strictlyAs(c.goType, b), "%s example %d uses only fields the Go type has", c.schema, i)
		}
	}
	// Webhook deliveries have no Go type: their examples are valid, and the
	// headers the schema requires are the ones the receiver sets.
	for _, name := range []string{"webhook-delivery.json", "webhook-headers.json"} {
		for i, ex := range document(t, name)["examples"].([]any) {
			b, err := json.Marshal(ex)
			require.NoError(t, err)
			require.NoError(t, validate(t, all[name], b), "%s example %d", name, i)
		}
	}
	required := stringsOf(document(t, "webhook-headers.json")["required"])
	require.ElementsMatch(t, []string{webhook.HeaderJob, webhook.HeaderDelivery, webhook.HeaderReceivedAt, "Nats-Msg-Id"}, required)
}

// strictlyAs decodes b into a value of type typ refusing unknown fields.
func strictlyAs(typ reflect.Type, b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(reflect.New(typ).Interface())
}

// TestInvalidMessagesRefusedByBoth: what the Go decoders refuse, the
// schemas refuse too.
func TestInvalidMessagesRefusedByBoth(t *testing.T) {
	t.Parallel()
	all := schemas(t)
	decoders := map[string]func([]byte) error{}
	for _, c := range contracts {
		decoders[c.schema] = c.decode
	}
	long := strings.Repeat("x", 300)
	metadata := map[string]string{}
	for i := range events.MaxMetadata + 1 {
		metadata[fmt.Sprint("k", i)] = "v"
	}
	tooMany, err := json.Marshal(metadata)
	require.NoError(t, err)
	tests := []struct{ schema, name, msg string }{
		{"submit.json", "no version", `{"model":"m","input":{}}`},
		{"submit.json", "version 2", `{"v":2,"model":"m","input":{}}`},
		{"submit.json", "no model", `{"v":1,"input":{}}`},
		{"submit.json", "model too long", `{"v":1,"model":"` + long + `","input":{}}`},
		{"submit.json", "control character", `{"v":1,"model":"a\u0007b","input":{}}`},
		{"submit.json", "no input", `{"v":1,"model":"m"}`},
		{"submit.json", "input not an object", `{"v":1,"model":"m","input":[1]}`},
		{"submit.json", "id with a dot", `{"v":1,"id":"a.b","model":"m","input":{}}`},
		{"submit.json", "id too long", `{"v":1,"id":"` + strings.Repeat("a", events.MaxIDLen+1) + `","model":"m","input":{}}`},
		{"submit.json", "deadline and timeout", `{"v":1,"model":"m","input":{},"deadline":"2030-01-01T00:00:00Z","timeout_s":5}`},
		{"submit.json", "deadline not a time", `{"v":1,"model":"m","input":{},"deadline":"tomorrow"}`},
		{"submit.json", "timeout over 7 days", `{"v":1,"model":"m","input":{},"timeout_s":604801}`},
		{"submit.json", "negative expected duration", `{"v":1,"model":"m","input":{},"expected_duration_s":-1}`},
		{"submit.json", "config key with a space", `{"v":1,"model":"m","input":{},"config_key":"a b"}`},
		{"submit.json", "key too long", `{"v":1,"idempotency_key":"` + long + `","model":"m","input":{}}`},
		{"submit.json", "too much metadata", `{"v":1,"model":"m","input":{},"metadata":` + string(tooMany) + `}`},
		{"submit.json", "metadata value too long", `{"v":1,"model":"m","input":{},"metadata":{"k":"` + strings.Repeat("x", events.MaxMetadataValue+1) + `"}}`},
		{"submit.json", "metadata not strings", `{"v":1,"model":"m","input":{},"metadata":{"k":1}}`},
		{"submit.json", "webhook not a boolean", `{"v":1,"model":"m","input":{},"webhook":"yes"}`},
		{"track.json", "no remote id", `{"v":1,"model":"m"}`},
		{"track.json", "remote id with a slash", `{"v":1,"remote_id":"a/b","model":"m"}`},
		{"track.json", "no model", `{"v":1,"remote_id":"r"}`},
		{"cancel.json", "no id", `{"v":1}`},
		{"cancel.json", "bad id", `{"v":1,"id":"a b"}`},
		{"cancel.json", "reason too long", `{"v":1,"id":"j","reason":"` + strings.Repeat("x", events.MaxReasonLen+1) + `"}`},
		{"route-event.json", "no by", `{"v":1,"type":"route_paused","time":"2026-01-01T00:00:00Z","route":"r"}`},
		{"route-event.json", "a job's type", `{"v":1,"type":"queued","time":"2026-01-01T00:00:00Z","route":"r","by":"a"}`},
		{"route-event.json", "by too long", `{"v":1,"type":"route_paused","time":"2026-01-01T00:00:00Z","route":"r","by":"` + strings.Repeat("b", events.MaxOperatorLen+1) + `"}`},
		{"route-event.json", "reason too long", `{"v":1,"type":"route_paused","time":"2026-01-01T00:00:00Z","route":"r","by":"a","reason":"` + strings.Repeat("x", events.MaxReasonLen+1) + `"}`},
		{"route-event.json", "bad route", `{"v":1,"type":"route_paused","time":"2026-01-01T00:00:00Z","route":"a b","by":"a"}`},
		{"route-event.json", "a drift without its model", `{"v":1,"type":"model_drift","time":"2026-01-01T00:00:00Z","route":"r","by":"pollux"}`},
		{"route-event.json", "a pause with a drift", `{"v":1,"type":"route_paused","time":"2026-01-01T00:00:00Z","route":"r","by":"a","drift":{"model":"m","ratio":2,"learned_p50_s":1,"recent_p50_s":2,"recent_jobs":8}}`},
		{"event.json", "no type", `{"v":1,"seq":1,"time":"2026-01-01T00:00:00Z","route":"r","job_id":"j"}`},
		{"event.json", "version 2", `{"v":2,"type":"queued","seq":1,"time":"2026-01-01T00:00:00Z","route":"r","job_id":"j"}`},
		{"event.json", "time not a time", `{"v":1,"type":"queued","seq":1,"time":"noon","route":"r","job_id":"j"}`},
		{"job.json", "unknown state", `{"id":"j","route":"r","model":"m","state":"paused","created_at":"2026-01-01T00:00:00Z","polls":0,"webhooks":0,"event_seq":0,"updated_at":"2026-01-01T00:00:00Z"}`},
		{"job.json", "no id", `{"route":"r","model":"m","state":"queued","created_at":"2026-01-01T00:00:00Z","polls":0,"webhooks":0,"event_seq":0,"updated_at":"2026-01-01T00:00:00Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.schema+"/"+tt.name, func(t *testing.T) {
			require.Error(t, validate(t, all[tt.schema], []byte(tt.msg)), "the schema refuses it")
			require.Error(t, decoders[tt.schema]([]byte(tt.msg)), "the Go decoder refuses it")
		})
	}
}

// TestSchemaFieldsMatchGoTypes: each schema lists exactly the Go type's
// JSON fields, and requires exactly those that are always encoded.
func TestSchemaFieldsMatchGoTypes(t *testing.T) {
	t.Parallel()
	for _, c := range contracts {
		doc := document(t, c.schema)
		props, required := keys(doc["properties"]), stringsOf(doc["required"])
		fields, always := jsonFields(c.goType)
		fields = slices.DeleteFunc(fields, func(f string) bool { return slices.Contains(c.internal, f) })
		require.ElementsMatch(t, fields, props, "%s: properties are the Go type's fields", c.schema)
		require.ElementsMatch(t, always, required, "%s: required are the fields always encoded", c.schema)
	}
	late := document(t, "job.json")["properties"].(map[string]any)["late"].(map[string]any)
	fields, always := jsonFields(reflect.TypeFor[state.Late]())
	require.ElementsMatch(t, fields, keys(late["properties"]))
	require.ElementsMatch(t, always, stringsOf(late["required"]))
}

// jsonFields returns a struct type's JSON field names, and those without
// omitempty or omitzero.
func jsonFields(typ reflect.Type) (fields, always []string) {
	for f := range typ.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		fields = append(fields, name)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			always = append(always, name)
		}
	}
	return fields, always
}

// TestSchemaEnumsAndLimits: the enums and limits of the schemas are the Go
// package's.
func TestSchemaEnumsAndLimits(t *testing.T) {
	t.Parallel()
	defs := document(t, "defs.json")["$defs"].(map[string]any)
	def := func(name, key string) any { return defs[name].(map[string]any)[key] }
	num := func(v any) float64 { return v.(float64) }

	require.Equal(t, float64(events.Version), num(def("version", "const")))
	require.Equal(t, fmt.Sprintf("^[A-Za-z0-9_-]{1,%d}$", events.MaxTokenLen), def("token", "pattern"))
	require.Equal(t, float64(events.MaxModelLen), num(def("model", "maxLength")))
	require.Equal(t, float64(events.MaxKeyLen), num(def("idempotencyKey", "maxLength")))
	require.Equal(t, events.MaxExpected.Seconds(), num(def("seconds", "maximum")))
	require.Equal(t, float64(events.MaxMetadata), num(def("metadata", "maxProperties")))
	require.Equal(t, float64(events.MaxMetadataKey), num(def("metadata", "propertyNames").(map[string]any)["maxLength"]))
	require.Equal(t, float64(events.MaxMetadataValue), num(def("metadata", "additionalProperties").(map[string]any)["maxLength"]))

	var states []string
	for _, s := range state.States {
		states = append(states, string(s))
	}
	require.Equal(t, states, stringsOf(def("state", "enum")))
	sources := []string{string(state.FromSubmit), string(state.FromPoll), string(state.FromWebhook), string(state.FromCancel), string(state.FromPollux), string(state.FromHedge)}
	require.Equal(t, sources, stringsOf(def("source", "enum")))

	event := document(t, "event.json")["properties"].(map[string]any)
	require.Equal(t, events.EventTypes, stringsOf(event["type"].(map[string]any)["enum"]))
	rejection := document(t, "rejection.json")["properties"].(map[string]any)
	require.Equal(t, []string{events.KindSubmit, events.KindTrack, events.KindCancel}, stringsOf(rejection["kind"].(map[string]any)["enum"]))
	cancel := document(t, "cancel.json")["properties"].(map[string]any)
	require.Equal(t, float64(events.MaxReasonLen), num(cancel["reason"].(map[string]any)["maxLength"]))
}

// TestAsyncAPI: the AsyncAPI document names the subjects of the Go
// namespace and a schema for every message, and every schema is used.
func TestAsyncAPI(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(apiDir, "asyncapi.yaml"))
	require.NoError(t, err)
	var doc struct {
		AsyncAPI string `yaml:"asyncapi"`
		Channels map[string]struct {
			Address  string `yaml:"address"`
			Messages map[string]struct {
				Ref string `yaml:"$ref"`
			} `yaml:"messages"`
		} `yaml:"channels"`
		Components struct {
			Messages map[string]struct {
				Headers struct {
					Schema struct {
						Ref string `yaml:"$ref"`
					} `yaml:"schema"`
				} `yaml:"headers"`
				Payload struct {
					SchemaFormat string `yaml:"schemaFormat"`
					Schema       struct {
						Ref string `yaml:"$ref"`
					} `yaml:"schema"`
				} `yaml:"payload"`
			} `yaml:"messages"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	require.Equal(t, "3.0.0", doc.AsyncAPI)

	ns := events.Default
	want := map[string]string{
		"submit":      ns.Submit("{route}"),
		"track":       ns.Track("{route}"),
		"cancel":      ns.Cancel("{route}"),
		"events":      ns.Event("{route}", "{job}"),
		"routeEvents": ns.RouteEvent("{route}"),
		"webhooks":    ns.Webhook("{route}"),
	}
	got := map[string]string{}
	for name, ch := range doc.Channels {
		got[name] = ch.Address
		require.NotEmpty(t, ch.Messages, "channel %s has messages", name)
		for _, m := range ch.Messages {
			ref, ok := strings.CutPrefix(m.Ref, "#/components/messages/")
			require.True(t, ok, "channel %s: message ref %q", name, m.Ref)
			require.Contains(t, doc.Components.Messages, ref)
		}
	}
	require.Equal(t, want, got)

	used := map[string]bool{"defs.json": true}
	for name, m := range doc.Components.Messages {
		require.Equal(t, "application/schema+json;version=draft-2020-12", m.Payload.SchemaFormat, name)
		for _, ref := range []string{m.Payload.Schema.Ref, m.Headers.Schema.Ref} {
			if ref == "" {
				continue
			}
			require.FileExists(t, filepath.Join(apiDir, ref), "message %s", name)
			used[filepath.Base(ref)] = true
		}
	}
	for _, c := range []string{"job.json", "rejection.json", "drift.json"} { // through event.json and route-event.json
		used[c] = true
	}
	files, err := filepath.Glob(filepath.Join(apiDir, "schemas", "*.json"))
	require.NoError(t, err)
	for _, f := range files {
		require.True(t, used[filepath.Base(f)], "schema %s is used by asyncapi.yaml", f)
	}
}

func keys(v any) []string {
	m, _ := v.(map[string]any)
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func stringsOf(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
