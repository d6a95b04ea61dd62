package ingest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// rejection waits for the rejected event on route's subject of job id.
func (s *rig) rejection(route, id string) *events.Event {
	s.t.Helper()
	c, err := s.JS.OrderedConsumer(s.Ctx(), s.NS.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.NS.Event(route, id)}})
	require.NoError(s.t, err)
	msg, err := c.Next(jetstream.FetchMaxWait(20 * time.Second))
	require.NoError(s.t, err, "no event on %s", s.NS.Event(route, id))
	ev, err := events.DecodeEvent(msg.Data())
	require.NoError(s.t, err)
	require.Equal(s.t, events.EventRejected, ev.Type)
	return ev
}

// sweeping runs ingest for route "fake" sweeping unserved routes often.
func sweeping(t *testing.T) *rig {
	t.Helper()
	return startWith(t, newFake(), config.Route{}, nil, func(c *ingest.Config) { c.SweepInterval = 50 * time.Millisecond })
}

// A submission sent to a mistyped route is rejected by the sweep of
// unserved routes on the id its idempotency key gives, whatever the key's
// length, as clients derive it.
func TestAMistypedRoutesRejectionLandsOnTheKeysID(t *testing.T) {
	t.Parallel()
	s := sweeping(t)
	key := strings.Repeat("k", events.MaxKeyLen+1)
	_, err := s.JS.Publish(context.Background(), s.NS.Submit("fakee"),
		[]byte(`{"v":1,"idempotency_key":"`+key+`","model":"m","input":{}}`))
	require.NoError(t, err)
	ev := s.rejection("fakee", events.KeyID("fakee", key))
	require.Contains(t, ev.Rejection.Error, `no route named "fakee"`)
}

// A cancel that names no usable job is rejected on "_" by the sweep of
// unserved routes, as by a route's own ingest.
func TestAMistypedRoutesCancelWithoutAnIDLandsOnThePlaceholder(t *testing.T) {
	t.Parallel()
	s := sweeping(t)
	_, err := s.JS.Publish(context.Background(), s.NS.Cancel("fakee"), []byte(`{"v":1,"reason":"typo"}`))
	require.NoError(t, err)
	ev := s.rejection("fakee", "_")
	require.Equal(t, events.KindCancel, ev.Rejection.Kind)
}

// The route's own ingest rejects an overlong idempotency key on the id
// the key gives, where a client that derived it waits.
func TestAnOverlongKeysRejectionLandsOnItsID(t *testing.T) {
	t.Parallel()
	s := start(t, newFake(), config.Route{}, nil)
	key := strings.Repeat("k", events.MaxKeyLen+1)
	_, err := s.JS.Publish(context.Background(), s.NS.Submit("fake"),
		[]byte(`{"v":1,"idempotency_key":"`+key+`","model":"m","input":{}}`))
	require.NoError(t, err)
	ev := s.rejection("fake", events.KeyID("fake", key))
	require.Equal(t, "idempotency_key", ev.Rejection.Field)
}
