package webhook_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/webhook"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/signature"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

type receiver struct {
	url string
	srv *server.Server
	res *events.Resources
}

func start(t *testing.T) *receiver {
	t.Helper()
	s := stack.New(t, stack.Config{})
	withHooks := repRoute(t, config.Route{WebhookMaxBody: 4 << 10})
	pollOnly, err := route.New("quiet", withHooks.Adapter, config.Route{}, 1)
	require.NoError(t, err)
	pollOnly.Webhooks = nil
	svc, err := webhook.New(webhook.Config{
		Routes:            map[string]*route.Route{"rep": withHooks, "quiet": pollOnly},
		ReadHeaderTimeout: 300 * time.Millisecond, PublishTimeout: 500 * time.Millisecond,
	}, s.JS, s.NS, s.Res, s.Jobs.Webhooks())
	require.NoError(t, err)
	r := &receiver{url: serve(t, svc), srv: s.Server, res: s.Res}
	require.Eventually(t, func() bool {
		resp, err := http.Get(r.url + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond, "receiver ready")
	return r
}

// repRoute is the Replicate route "rep", its deliveries signed with secret
// (rc's WebhookURL defaults to one on it).
func repRoute(t *testing.T, rc config.Route) *route.Route {
	t.Helper()
	a, err := replicate.New(provider.Config{Route: "rep", Token: "t", WebhookSecret: secret})
	require.NoError(t, err)
	rc.WebhookURL = cmp.Or(rc.WebhookURL, "http://x/webhooks/rep")
	rt, err := route.New("rep", a, rc, 1)
	require.NoError(t, err)
	return rt
}

// serve runs svc (its receiver and its applier) on a loopback port until
// the test ends, and returns its base URL.
func serve(t *testing.T, svc *webhook.Service) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln := listenLocal(t)
	var g errgroup.Group
	g.Go(func() error { return svc.Run(ctx, ln) })
	t.Cleanup(func() { cancel(); _ = g.Wait() })
	return "http://" + ln.Addr().String()
}

func signedRequest(t *testing.T, url, id string, ts time.Time, body []byte) *http.Request {
	t.Helper()
	key, err := signature.ParseSecret(secret)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", signature.Sign(key, id, ts, body))
	req.Header.Set("Content-Type", "application/json")
	return req
}

func do(t *testing.T, req *http.Request) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, resp.Header
}

var prediction = []byte(`{"id":"p1","status":"succeeded","output":["https://x/out.mp4"],"completed_at":"2026-11-29T10:00:00Z"}`)

func TestReceiverStoresOnceAndAnswersAfterThePubAck(t *testing.T) {
	t.Parallel()
	r := start(t)
	url := r.url + "/webhooks/rep?job=job-1"
	code, body, _ := do(t, signedRequest(t, url, "msg_1", time.Now(), prediction))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, true, body["ok"])

	// A retry of the same delivery, re-signed with a new timestamp.
	code, body, _ = do(t, signedRequest(t, url, "msg_1", time.Now().Add(time.Second), prediction))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, true, body["duplicate"])

	// The applier consumes deliveries from the work queue (this one is for
	// an unknown job: it is kept for the hold window, then dropped); the
	// stream's sequence counts what was stored.
	info, err := r.res.Webhooks.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.LastSeq, "stored once")
}

func TestReceiverRefusals(t *testing.T) {
	t.Parallel()
	r := start(t)
	good := func() *http.Request {
		return signedRequest(t, r.url+"/webhooks/rep?job=job-1", "msg_2", time.Now(), prediction)
	}
	tests := []struct {
		name string
		req  func() *http.Request
		code int
	}{
		{"GET", func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, r.url+"/webhooks/rep", nil)
			return req
		}, http.StatusMethodNotAllowed},
		{"unknown route", func() *http.Request {
			return signedRequest(t, r.url+"/webhooks/nope?job=j", "m", time.Now(), prediction)
		}, http.StatusNotFound},
		{"route without webhooks", func() *http.Request {
			return signedRequest(t, r.url+"/webhooks/quiet?job=j", "m", time.Now(), prediction)
		}, http.StatusNotFound},
		{"gzip", func() *http.Request {
			req := good()
			req.Header.Set("Content-Encoding", "gzip")
			return req
		}, http.StatusUnsupportedMediaType},
		{"too large", func() *http.Request {
			return signedRequest(t, r.url+"/webhooks/rep?job=j", "m", time.Now(), bytes.Repeat([]byte("x"), 5<<10))
		}, http.StatusRequestEntityTooLarge},
		{"bad signature", func() *http.Request {
			req := good()
			req.Header.Set("webhook-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
			return req
		}, http.StatusUnauthorized},
		{"stale", func() *http.Request {
			return signedRequest(t, r.url+"/webhooks/rep?job=j", "m", time.Now().Add(-time.Hour), prediction)
		}, http.StatusUnauthorized},
		{"missing headers", func() *http.Request {
			req := good()
			req.Header.Del("webhook-id")
			return req
		}, http.StatusBadRequest},
		{"no job", func() *http.Request {
			return signedRequest(t, r.url+"/webhooks/rep", "m", time.Now(), prediction)
		}, http.StatusBadRequest},
		{"bad job", func() *http.Request {
			return signedRequest(t, r.url+"/webhooks/rep?job=a.b", "m", time.Now(), prediction)
		}, http.StatusBadRequest},
		{"signed, but not a prediction", func() *http.Request {
			return signedRequest(t, r.url+"/webhooks/rep?job=job-1", "m", time.Now(), []byte(`not json`))
		}, http.StatusBadRequest},
		{"signed, but names no job", func() *http.Request {
			return signedRequest(t, r.url+"/webhooks/rep?job=job-1", "m", time.Now(), []byte(`{"status":"succeeded"}`))
		}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, h := do(t, tt.req())
			require.Equal(t, tt.code, code, "%v", body)
			require.NotEqual(t, http.StatusGone, code)
			if code == http.StatusMethodNotAllowed {
				require.Equal(t, http.MethodPost, h.Get("Allow"))
			}
			// Every refusal is the problem body the front door answers with.
			detail, ok := body["error"].(map[string]any)
			require.True(t, ok, "a problem body: %v", body)
			require.NotEmpty(t, detail["code"])
			require.NotEmpty(t, detail["message"])
		})
	}
	info, err := r.res.Webhooks.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing refused was stored")
}

func TestReceiverAsksForARetryWhenNATSIsDown(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.srv.Shutdown()
	r.srv.WaitForShutdown()
	code, _, h := do(t, signedRequest(t, r.url+"/webhooks/rep?job=j", "m", time.Now(), prediction))
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "2", h.Get("Retry-After"))
}

// While NATS is away the receiver answers 503 by its own PublishTimeout,
// which bounds the lookup of the delivery id as well as the publish: the
// JetStream context here waits an hour for an API answer, so a lookup
// bounded only by it holds the delivery until the client below gives up
// (its timeout only guards against that hang).
func TestReceiverAsksForARetryWhateverTheJetStreamTimeout(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	nc, _ := natstest.Connect(t, srv)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Hour))
	require.NoError(t, err)
	res, err := events.Default.Setup(context.Background(), js, events.Options{})
	require.NoError(t, err)
	svc, err := webhook.New(webhook.Config{Routes: map[string]*route.Route{"rep": repRoute(t, config.Route{})}, PublishTimeout: 200 * time.Millisecond},
		js, events.Default, res, jobs.New(events.Default, js, res, jobs.Config{}).Webhooks())
	require.NoError(t, err)
	hs := httptest.NewServer(svc.Handler())
	defer hs.Close()
	srv.Shutdown()
	srv.WaitForShutdown()

	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(signedRequest(t, hs.URL+"/webhooks/rep?job=job-1", "msg_1", time.Now(), prediction))
	require.NoError(t, err, "answered while NATS is down, not held for the JetStream context's timeout")
	_ = resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
}

func TestSlowHeadersAreCutOff(t *testing.T) {
	t.Parallel()
	r := start(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = io.WriteString(conn, "POST /webhooks/rep HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	// Never finish the headers: the server must close the connection at
	// its ReadHeaderTimeout rather than hold it forever.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	start := time.Now()
	_, err = bufio.NewReader(conn).ReadString('\n')
	require.Error(t, err, "connection closed")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed by the server, not by our read deadline")
	require.Less(t, time.Since(start), 4*time.Second)
}

// TestHandlerStoresTheRawDelivery reads what the receiver stored, with no
// applier running.
func TestHandlerStoresTheRawDelivery(t *testing.T) {
	t.Parallel()
	s := stack.New(t, stack.Config{})
	res := s.Res
	svc, err := webhook.New(webhook.Config{Routes: map[string]*route.Route{"rep": repRoute(t, config.Route{})}}, s.JS, s.NS, res, s.Jobs.Webhooks())
	require.NoError(t, err)
	hs := httptest.NewServer(svc.Handler())
	defer hs.Close()

	req := signedRequest(t, hs.URL+"/webhooks/rep?job=job-1", "msg_1", time.Now(), prediction)
	req.Header.Set("Authorization", "Bearer leaked?")
	// The sender's trace context poses as the receipt's, which an applier
	// with tracing on links its span to: this receiver, tracing off, has
	// none to put in its place.
	req.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	req.Header.Set("tracestate", "vendor=x")
	code, _, _ := do(t, req)
	require.Equal(t, http.StatusOK, code)
	msg, err := res.Webhooks.GetLastMsgForSubject(context.Background(), events.Default.Webhook("rep"))
	require.NoError(t, err)
	require.Equal(t, prediction, msg.Data, "the raw bytes as received")
	require.Equal(t, "job-1", msg.Header.Get(webhook.HeaderJob))
	require.Equal(t, "msg_1", msg.Header.Get(webhook.HeaderDelivery))
	require.Equal(t, "msg_1", http.Header(msg.Header).Get("webhook-id"), "the provider's headers are kept")
	require.Empty(t, http.Header(msg.Header).Get("Authorization"), "credentials are not")
	for k := range msg.Header {
		require.NotContains(t, []string{"traceparent", "tracestate"}, strings.ToLower(k), "nor a trace context of the sender's")
	}
}
