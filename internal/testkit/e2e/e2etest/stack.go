package e2etest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
)

// Env is one test's running Pollux.
type Env struct {
	*dev.Stack
	NC  *nats.Conn
	JS  jetstream.JetStream
	NS  events.Namespace
	Log *EventLog
	// InexactPolls marks a scenario that loses the count of quiet polls
	// by design (a repartition: a new consumer's deliveries start anew).
	InexactPolls bool
}

// Start runs the stack on a fresh embedded server until the test ends.
func Start(t *testing.T, sc dev.StackConfig) *Env {
	t.Helper()
	srv := natstest.Server(t)
	nc, js := natstest.Connect(t, srv)
	return StartWith(t, nc, js, sc)
}

// StartWith runs the stack on a connection until the test ends.
func StartWith(t *testing.T, nc *nats.Conn, js jetstream.JetStream, sc dev.StackConfig) *Env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, g.Wait())
	})
	// POLLUX_TEST_LOG=dir keeps each test's logs in dir/<test>.json.
	if dir := os.Getenv("POLLUX_TEST_LOG"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".json"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = f.Close() })
		sc.Logger = zerolog.New(f).With().Timestamp().Logger()
	}
	stack, err := dev.Start(gctx, g, nc, sc)
	require.NoError(t, err)
	e := &Env{Stack: stack, NC: nc, JS: js, NS: stack.Env.NS}
	e.Log = Follow(t, js, e.NS)
	return e
}

// Publish publishes v (bytes, a string or a value marshaled as JSON) on
// subject, retrying while the stream has no leader to answer.
func (e *Env) Publish(t *testing.T, subject string, v any) {
	t.Helper()
	var data []byte
	switch b := v.(type) {
	case []byte:
		data = b
	case string:
		data = []byte(b)
	default:
		var err error
		data, err = json.Marshal(v)
		require.NoError(t, err)
	}
	// As a client would, retry while the stream has no leader to answer
	// (a cluster electing one): a duplicate submission is deduplicated.
	var err error
	require.Eventually(t, func() bool {
		_, err = e.JS.Publish(context.Background(), subject, data)
		return !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, context.DeadlineExceeded)
	}, 30*time.Second, 250*time.Millisecond, "publish to %s: a stream leader to answer", subject)
	require.NoError(t, err)
}

// StreamMsgs is the number of messages stream s holds.
func (e *Env) StreamMsgs(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

// WaitTerminal waits until every one of ids has a terminal event; when the
// timeout passes first it reports, for up to ten that have none, the job's
// record, its check message and the check consumers' state, so that a
// stuck job tells where it stuck.
func (e *Env) WaitTerminal(t *testing.T, ids []string, timeout time.Duration) {
	t.Helper()
	WaitTerminal(t, e.JS, e.Log, ids, timeout)
}
