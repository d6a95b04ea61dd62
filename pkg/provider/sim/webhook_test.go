package sim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// hook is one webhook delivery attempt as a receiver saw it.
type hook struct {
	at     time.Time
	header http.Header
	body   []byte
	pred   wirePred
}

// receiver is a webhook endpoint over real HTTP. answer gives the status
// code for attempt n (0-based); nil answers 204.
func receiver(t *testing.T, answer func(n int) int) (url string, hooks chan hook) {
	t.Helper()
	hooks = make(chan hook, 100)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var p wirePred
		_ = json.Unmarshal(body, &p)
		hooks <- hook{at: time.Now(), header: r.Header.Clone(), body: body, pred: p}
		code := http.StatusNoContent
		if answer != nil {
			code = answer(int(n.Add(1) - 1))
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hooks
}

func recv(t *testing.T, hooks <-chan hook) hook {
	t.Helper()
	select {
	case h := <-hooks:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s")
		return hook{}
	}
}

func webhookBody(url string, filter ...string) string {
	b, _ := json.Marshal(map[string]any{
		"version": "owner/model:v1", "input": map[string]any{"prompt": "x"},
		"webhook": url, "webhook_events_filter": filter,
	})
	return string(b)
}

func TestWebhookStartAndCompletedSigned(t *testing.T) {
	t.Parallel()
	url, hooks := receiver(t, nil)
	e := setup(t, sim.Config{Default: exact(2*time.Second, 2*time.Second), TimeScale: 20})
	e.run()
	resp, b := e.do(http.MethodGet, "/v1/webhooks/default/secret", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	secret := decode[map[string]string](t, b)["key"]

	p := e.create(webhookBody(url, "start", "completed"))
	require.Equal(t, url, p.Webhook)
	require.Equal(t, []string{"start", "completed"}, p.WebhookEventsFilter)

	// Deliveries go out concurrently, as Replicate's do: a slow machine
	// may see the completed one first.
	start, done := recv(t, hooks), recv(t, hooks)
	if start.pred.Status != sim.StatusProcessing {
		start, done = done, start
	}
	checkSignature(t, secret, start.header, start.body)
	require.Equal(t, p.ID, start.pred.ID)
	require.Equal(t, sim.StatusProcessing, start.pred.Status)
	require.Equal(t, "application/json", start.header.Get("Content-Type"))

	checkSignature(t, secret, done.header, done.body)
	require.Equal(t, sim.StatusSucceeded, done.pred.Status)
	require.NotEqual(t, start.header.Get("webhook-id"), done.header.Get("webhook-id"))
	require.NotContains(t, done.header.Get("webhook-id"), ".")
	ts, err := strconv.ParseInt(done.header.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().Unix(), ts, 5)
	// The body is the prediction as GET shows it now.
	got := e.mustGet(p.ID)
	require.Equal(t, got.CompletedAt, done.pred.CompletedAt)
	require.Equal(t, got.Output, done.pred.Output)
	require.False(t, parseTime(t, done.pred.CompletedAt).After(done.at), "sent at or after its terminal moment")

	require.Eventually(t, func() bool { return e.sim.Stats().WebhooksSent == 2 }, 5*time.Second, 5*time.Millisecond)
	st := e.sim.Stats()
	require.Equal(t, 2, st.WebhookAttempts)
	require.Zero(t, st.WebhooksFailed)
	truth := e.truth(p.ID)
	require.True(t, truth.WebhookSent)
	require.Equal(t, 2, truth.WebhookAttempts)
}

func TestWebhookRetriedAfter500(t *testing.T) {
	t.Parallel()
	url, hooks := receiver(t, func(n int) int {
		if n == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	e := setup(t, sim.Config{Default: exact(time.Second, time.Second), TimeScale: 20})
	e.run()
	p := e.create(webhookBody(url)) // no filter: "completed" only

	first, second := recv(t, hooks), recv(t, hooks)
	require.Equal(t, first.header.Get("webhook-id"), second.header.Get("webhook-id"))
	require.Equal(t, first.body, second.body)
	require.Equal(t, sim.StatusSucceeded, second.pred.Status)
	checkSignature(t, e.sim.WebhookSecret(), second.header, second.body)
	require.GreaterOrEqual(t, second.at.Sub(first.at), 200*time.Millisecond, "backed off")

	require.Eventually(t, func() bool { return e.truth(p.ID).WebhookSent }, 5*time.Second, 5*time.Millisecond)
	st := e.sim.Stats()
	require.Equal(t, 2, st.WebhookAttempts)
	require.Equal(t, 1, st.WebhooksSent)
	require.Zero(t, st.WebhooksFailed)
}

func TestWebhookMissing(t *testing.T) {
	t.Parallel()
	url, hooks := receiver(t, nil)
	e := setup(t, sim.Config{Default: exact(time.Second, time.Second), TimeScale: 20,
		Faults: sim.Faults{WebhookMissingRate: 1}})
	e.run()
	p := e.create(webhookBody(url, "completed"))
	// Counted at the moment it would have been sent; nothing is sent later.
	require.Eventually(t, func() bool { return e.sim.Stats().WebhooksMissing == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Empty(t, hooks)
	require.Zero(t, e.sim.Stats().WebhookAttempts)
	truth := e.truth(p.ID)
	require.Equal(t, sim.StatusSucceeded, truth.Status)
	require.True(t, truth.WebhookMissing)
	require.False(t, truth.WebhookSent)
}

// The tests below run in a synctest bubble with a fake transport, so the
// retry schedule can be checked to the nanosecond.

// fakeHooks is a webhook transport that records attempts and answers from
// a script.
type fakeHooks struct {
	calls  chan hook
	answer func(n int) (code int, retryAfter string)
	n      atomic.Int64 // attempts so far, across concurrent deliveries
}

func (f *fakeHooks) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var p wirePred
	_ = json.Unmarshal(body, &p)
	f.calls <- hook{at: time.Now(), header: r.Header.Clone(), body: body, pred: p}
	n := int(f.n.Add(1) - 1)
	code, ra := http.StatusOK, ""
	if f.answer != nil {
		code, ra = f.answer(n)
	}
	h := http.Header{}
	if ra != "" {
		h.Set("Retry-After", ra)
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// bubble starts a sim and its Run inside the synctest bubble; the returned
// stop ends Run and waits for it.
func bubble(t *testing.T, cfg sim.Config, answer func(n int) (int, string)) (*sim.Server, chan hook, func()) {
	f := &fakeHooks{calls: make(chan hook, 100), answer: answer}
	cfg.HTTPClient = &http.Client{Transport: f}
	s, err := sim.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return s, f.calls, func() {
		cancel()
		require.NoError(t, <-done)
	}
}

// serve calls the handler directly (no network inside the bubble).
func serve(t *testing.T, s *sim.Server, method, path, body string, hdr ...string) (int, wirePred) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	s.Handler().ServeHTTP(rec, req)
	var p wirePred
	if rec.Code/100 == 2 {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	}
	return rec.Code, p
}

func TestWebhookRetryScheduleGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, calls, stop := bubble(t, sim.Config{Default: exact(time.Second, time.Second)},
			func(int) (int, string) { return http.StatusBadGateway, "" })
		defer stop()
		code, p := serve(t, s, http.MethodPost, "/v1/predictions", webhookBody("http://hooks.test/x"))
		require.Equal(t, http.StatusCreated, code)
		end := parseTime(t, &p.CreatedAt).Add(2 * time.Second)

		var at []time.Duration
		var ids []string
		for range 6 {
			h := <-calls
			at = append(at, h.at.Sub(end))
			ids = append(ids, h.header.Get("webhook-id"))
		}
		require.Equal(t, []time.Duration{0, 250 * time.Millisecond, 750 * time.Millisecond,
			1750 * time.Millisecond, 3750 * time.Millisecond, 7750 * time.Millisecond}, at)
		for _, id := range ids {
			require.Equal(t, ids[0], id)
		}
		synctest.Wait()
		st := s.Stats()
		require.Equal(t, 6, st.WebhookAttempts)
		require.Equal(t, 1, st.WebhooksFailed)
		require.Zero(t, st.WebhooksSent)
		require.Empty(t, calls)
	})
}

func TestWebhookHonoursReceiverRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, calls, stop := bubble(t, sim.Config{Default: exact(time.Second, time.Second)},
			func(n int) (int, string) {
				if n == 0 {
					return http.StatusServiceUnavailable, "3"
				}
				return http.StatusOK, ""
			})
		defer stop()
		serve(t, s, http.MethodPost, "/v1/predictions", webhookBody("http://hooks.test/x"))
		first, second := <-calls, <-calls
		require.Equal(t, 3*time.Second, second.at.Sub(first.at))
		synctest.Wait()
		require.Equal(t, 1, s.Stats().WebhooksSent)
	})
}

func TestWebhookLateAndDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, calls, stop := bubble(t, sim.Config{
			Default: exact(time.Second, time.Second),
			Faults: sim.Faults{WebhookLateRate: 1, WebhookLateBy: dur(10 * time.Second),
				WebhookDuplicateRate: 1},
		}, nil)
		defer stop()
		_, p := serve(t, s, http.MethodPost, "/v1/predictions", webhookBody("http://hooks.test/x"))
		end := parseTime(t, &p.CreatedAt).Add(2 * time.Second)

		first, second := <-calls, <-calls
		require.Equal(t, 10*time.Second, first.at.Sub(end), "late by WebhookLateBy")
		require.Equal(t, first.header.Get("webhook-id"), second.header.Get("webhook-id"))
		require.Equal(t, first.body, second.body)
		require.Equal(t, sim.StatusSucceeded, first.pred.Status)
		require.Equal(t, end.Format(time.RFC3339Nano), *first.pred.CompletedAt)
		synctest.Wait()
		st := s.Stats()
		require.Equal(t, 2, st.WebhooksSent)
		require.Equal(t, 1, st.WebhooksDuplicated)
		require.Equal(t, 1, st.WebhooksLate)
	})
}

func TestWebhookOnCancelAndAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, calls, stop := bubble(t, sim.Config{Default: sim.Model{
			QueueMedian: dur(10 * time.Second), RunMedian: dur(time.Minute), NeverFinish: 1}}, nil)
		defer stop()
		// Aborted by its deadline before it starts.
		_, a := serve(t, s, http.MethodPost, "/v1/predictions", webhookBody("http://hooks.test/x"),
			"Cancel-After", "5s")
		h := <-calls
		require.Equal(t, a.ID, h.pred.ID)
		require.Equal(t, sim.StatusAborted, h.pred.Status)
		require.Nil(t, h.pred.StartedAt)

		// Never finishes; canceled by the client while processing.
		_, b := serve(t, s, http.MethodPost, "/v1/predictions", webhookBody("http://hooks.test/x", "start", "completed"))
		h = <-calls
		require.Equal(t, sim.StatusProcessing, h.pred.Status)
		code, c := serve(t, s, http.MethodPost, "/v1/predictions/"+b.ID+"/cancel", "")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, sim.StatusCanceled, c.Status)
		h = <-calls
		require.Equal(t, sim.StatusCanceled, h.pred.Status)
		require.Equal(t, c.CompletedAt, h.pred.CompletedAt)
		synctest.Wait()
		require.Empty(t, calls)
		require.Equal(t, 3, s.Stats().WebhooksSent)
	})
}

func TestRunOnlyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, stop := bubble(t, sim.Config{}, nil)
		defer stop()
		synctest.Wait()
		require.Error(t, s.Run(context.Background()))
	})
}

// With a create delay, an instant prediction's completion webhook is sent
// before the create is answered, as a fast provider's may be.
func TestCreateDelayLetsTheWebhookGoFirst(t *testing.T) {
	t.Parallel()
	url, hooks := receiver(t, nil)
	e := setup(t, sim.Config{Default: exact(time.Millisecond, time.Millisecond), TimeScale: 1,
		CreateDelay: sim.Duration(300 * time.Millisecond)})
	e.run()
	resp, b := e.do(http.MethodPost, "/v1/predictions", webhookBody(url))
	answered := time.Now()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	h := recv(t, hooks)
	require.Equal(t, "succeeded", h.pred.Status)
	require.Equal(t, decode[wirePred](t, b).ID, h.pred.ID)
	require.True(t, h.at.Before(answered), "the webhook came %s before the answer", answered.Sub(h.at))
}
