package events_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/events"
)

func TestDecodeSubmit(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 300)
	tests := []struct {
		name  string
		in    string
		field string // "" and ok=false: whole-message problem
		ok    bool
	}{
		{"minimal", `{"v":1,"model":"owner/m","input":{"prompt":"a cat"}}`, "", true},
		{"full", `{"v":1,"id":"job-1","idempotency_key":"k1","model":"m","input":{},"deadline":"2030-01-01T00:00:00Z","expected_duration_s":60,"webhook":true,"config_key":"720p","metadata":{"user":"u1"},"extra":"ignored"}`, "", true},
		{"not json", `not json`, "", false},
		{"empty", ``, "", false},
		{"array", `[1]`, "", false},
		{"missing v", `{"model":"m","input":{}}`, "v", false},
		{"future v", `{"v":2,"model":"m","input":{}}`, "v", false},
		{"v as string", `{"v":"1","model":"m","input":{}}`, "v", false},
		{"missing model", `{"v":1,"input":{}}`, "model", false},
		{"model too long", `{"v":1,"model":"` + long + `","input":{}}`, "model", false},
		{"model control char", `{"v":1,"model":"a\u0001b","input":{}}`, "model", false},
		{"missing input", `{"v":1,"model":"m"}`, "input", false},
		{"null input", `{"v":1,"model":"m","input":null}`, "input", false},
		{"input not object", `{"v":1,"model":"m","input":[1]}`, "input", false},
		{"bad id", `{"v":1,"id":"a.b","model":"m","input":{}}`, "id", false},
		{"id too long", `{"v":1,"id":"` + strings.Repeat("a", 129) + `","model":"m","input":{}}`, "id", false},
		{"bad deadline", `{"v":1,"model":"m","input":{},"deadline":"tomorrow"}`, "deadline", false},
		{"deadline and timeout", `{"v":1,"model":"m","input":{},"deadline":"2030-01-01T00:00:00Z","timeout_s":5}`, "timeout_s", false},
		{"negative expected", `{"v":1,"model":"m","input":{},"expected_duration_s":-1}`, "expected_duration_s", false},
		{"expected as string", `{"v":1,"model":"m","input":{},"expected_duration_s":"60"}`, "expected_duration_s", false},
		{"bad config key", `{"v":1,"model":"m","input":{},"config_key":"a b"}`, "config_key", false},
		{"key too long", `{"v":1,"idempotency_key":"` + long + `","model":"m","input":{}}`, "idempotency_key", false},
		{"oversized", `{"v":1,"model":"m","input":{"p":"` + strings.Repeat("x", events.MaxMessageBytes) + `"}}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := events.DecodeSubmit([]byte(tt.in))
			if tt.ok {
				require.NoError(t, err)
				require.NotNil(t, m)
				return
			}
			var fe *events.FieldError
			require.True(t, errors.As(err, &fe), "want a *FieldError, got %v", err)
			require.Equal(t, tt.field, fe.Field, "error: %v", err)
			require.NotEmpty(t, fe.Problem)
		})
	}
}

func TestDecodeTrackAndCancel(t *testing.T) {
	t.Parallel()
	tr, err := events.DecodeTrack([]byte(`{"v":1,"remote_id":"abc123","model":"m"}`))
	require.NoError(t, err)
	require.Equal(t, "abc123", tr.RemoteID)

	_, err = events.DecodeTrack([]byte(`{"v":1,"model":"m"}`))
	require.ErrorContains(t, err, "remote_id: required")
	_, err = events.DecodeTrack([]byte(`{"v":1,"remote_id":"../x","model":"m"}`))
	require.ErrorContains(t, err, "remote_id")

	c, err := events.DecodeCancel([]byte(`{"v":1,"id":"job-1","reason":"user"}`))
	require.NoError(t, err)
	require.Equal(t, "job-1", c.ID)
	_, err = events.DecodeCancel([]byte(`{"v":1}`))
	require.ErrorContains(t, err, "id: required")
	_, err = events.DecodeCancel([]byte(`{"v":1,"id":"x y"}`))
	require.ErrorContains(t, err, "id:")
}

func TestResolveDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := now.Add(time.Hour)
	require.Equal(t, d, events.ResolveDeadline(d, 0, now))
	require.Equal(t, now.Add(90*time.Second), events.ResolveDeadline(time.Time{}, 90, now))
	require.True(t, events.ResolveDeadline(time.Time{}, 0, now).IsZero())
}

func TestDerivedIDs(t *testing.T) {
	t.Parallel()
	a := events.KeyID("replicate", "order-42")
	require.Equal(t, a, events.KeyID("replicate", "order-42"), "deterministic")
	require.NotEqual(t, a, events.KeyID("fal", "order-42"), "scoped to the route")
	require.NotEqual(t, a, events.KeyID("replicate", "order-43"))
	require.True(t, events.ValidToken(a))

	ts := time.Unix(1700000000, 5)
	m := events.MessageID(7, ts)
	require.Equal(t, m, events.MessageID(7, ts))
	require.NotEqual(t, m, events.MessageID(7, ts.Add(time.Nanosecond)), "a recreated stream does not reuse ids")
	require.NotEqual(t, m, events.MessageID(8, ts))
	require.True(t, events.ValidToken(m))
}

func TestEventRoundTrip(t *testing.T) {
	t.Parallel()
	ev := &events.Event{V: 1, Type: events.EventRejected, Route: "r", JobID: "j",
		Time: time.Unix(1, 0).UTC(), Rejection: &events.Rejection{Kind: "submit", Field: "model", Error: "model: required"}}
	b, err := ev.Encode()
	require.NoError(t, err)
	back, err := events.DecodeEvent(b)
	require.NoError(t, err)
	require.Equal(t, ev, back)
}

func FuzzDecodeSubmit(f *testing.F) {
	f.Add([]byte(`{"v":1,"model":"m","input":{}}`))
	f.Add([]byte(`{"v":1,"id":"a","idempotency_key":"k","model":"m","input":{},"deadline":"2030-01-01T00:00:00Z","metadata":{"a":"b"}}`))
	f.Add([]byte(`{"v":1,"model":"m","input":{"x":[1,2,{"y":null}]},"timeout_s":1e308}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := events.DecodeSubmit(b)
		if err != nil {
			var fe *events.FieldError
			require.True(t, errors.As(err, &fe))
			return
		}
		// What is accepted is valid by the contract's own rules.
		require.Equal(t, 1, m.V)
		require.NotEmpty(t, m.Model)
		require.True(t, m.ID == "" || events.ValidToken(m.ID))
		require.Equal(t, byte('{'), m.Input[0])
	})
}

func FuzzDecodeTrack(f *testing.F) {
	f.Add([]byte(`{"v":1,"remote_id":"abc","model":"m"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := events.DecodeTrack(b)
		if err == nil {
			require.NotEmpty(t, m.RemoteID)
			require.NotContains(t, m.RemoteID, "/")
		}
	})
}
