package learn_test

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/learn"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func finished(st state.State, total, run time.Duration) *state.Job {
	j := &state.Job{ID: "j", Route: "r", Model: "owner/model:v1", State: st, SubmittedAt: t0, CompletedAt: t0.Add(total)}
	if run > 0 {
		j.StartedAt = j.CompletedAt.Add(-run)
	}
	return j
}

func TestDurations(t *testing.T) {
	t.Parallel()
	total, run, ok := learn.Durations(finished(state.Succeeded, 90*time.Second, 60*time.Second))
	require.True(t, ok)
	require.Equal(t, 90*time.Second, total)
	require.Equal(t, 60*time.Second, run)

	_, run, ok = learn.Durations(finished(state.Failed, 10*time.Second, 0))
	require.True(t, ok, "failures end on their own too")
	require.Zero(t, run, "never started: no run time")

	providerCancel := finished(state.Canceled, 30*time.Second, 0)
	_, _, ok = learn.Durations(providerCancel)
	require.True(t, ok)

	userCancel := finished(state.Canceled, 30*time.Second, 0)
	userCancel.CancelRequestedAt = t0
	for _, j := range []*state.Job{userCancel, finished(state.Expired, time.Hour, 0), finished(state.Lost, time.Minute, 0),
		finished(state.Running, time.Minute, 0), {State: state.Succeeded}} {
		_, _, ok := learn.Durations(j)
		require.False(t, ok, "%s teaches nothing", j.State)
	}
}

// fleet returns n Stats over one bucket, as n processes would have.
func fleet(t *testing.T, n int) []*learn.Stats {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "stats"})
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	out := make([]*learn.Stats, n)
	for i := range out {
		s := learn.New(kv, zerolog.Nop())
		s.FlushEvery = time.Hour // the tests flush by hand
		ready := make(chan struct{})
		wg.Go(func() { require.NoError(t, s.Run(ctx, ready)) })
		<-ready
		out[i] = s
	}
	return out
}

func TestTheFleetLearnsTogether(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 3)
	ctx := context.Background()
	total, run := ss[0].Lookup("r", "owner/model:v1", "", 0)
	require.Nil(t, total, "nothing learned yet")
	require.Nil(t, run)

	// Every process sees jobs end, concurrently.
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			for range 40 {
				s.Observe(finished(state.Succeeded, 90*time.Second, 60*time.Second))
			}
			s.Flush(ctx)
		})
	}
	wg.Wait()
	for _, s := range ss {
		require.Eventually(t, func() bool {
			total, run := s.Lookup("r", "owner/model:v1", "", 0)
			return total != nil && total.Count() == 120 && run.Count() == 120
		}, 5*time.Second, 10*time.Millisecond, "no observation lost to a concurrent writer, and all processes see them")
	}
	total, run = ss[1].Lookup("r", "owner/model:v1", "", 0)
	require.InDelta(t, 90, total.Quantile(0.5).Seconds(), 10)
	require.InDelta(t, 60, run.Quantile(0.5).Seconds(), 7)

	other, _ := ss[1].Lookup("r", "owner/model:v1", "1080p", 0)
	require.Equal(t, total.Quantile(0.5), other.Quantile(0.5), "a configuration never seen falls back to its model")
}

// Each job teaches its configuration and its model; a lookup falls back
// from a sparse configuration to its model, and a model the route has not
// learned gets nothing (the schedule's table, by the job's own hint).
func TestLookupFallsBackAlongTheLevels(t *testing.T) {
	t.Parallel()
	s := fleet(t, 1)[0]
	ctx := context.Background()
	job := func(model, cfg string, total time.Duration) *state.Job {
		j := finished(state.Succeeded, total, total/2)
		j.Model, j.ConfigKey = model, cfg
		return j
	}
	for range 30 {
		s.Observe(job("m", "1080p", 200*time.Second))
		s.Observe(job("fast", "", 20*time.Second))
	}
	for range 3 {
		s.Observe(job("m", "4k", 600*time.Second))
	}
	s.Flush(ctx)

	own, _ := s.Lookup("r", "m", "1080p", 0)
	require.InDelta(t, 200, own.Quantile(0.5).Seconds(), 20, "enough samples: its own")
	unseen, run := s.Lookup("r", "m", "720p", 0)
	require.InDelta(t, 200, unseen.Quantile(0.2).Seconds(), 20, "an unseen configuration: its model's")
	require.NotNil(t, run)
	sparse, _ := s.Lookup("r", "m", "4k", 0)
	require.InDelta(t, schedule.DefaultMinSamples, sparse.Weight(), 1e-6)
	require.InDelta(t, 600, sparse.Quantile(0.95).Seconds(), 60, "its own few samples count")
	require.Less(t, sparse.Quantile(0.5), 300*time.Second, "completed by its model's history")
	newModel, _ := s.Lookup("r", "new", "", 0)
	require.Nil(t, newModel, "a model new to the route: the table, by its own hint, not a mix of other models")
	none, _ := s.Lookup("elsewhere", "m", "1080p", 0)
	require.Nil(t, none, "nothing learned on another route: the cold-start table")

	again, _ := s.Lookup("r", "m", "4k", 0)
	require.Same(t, sparse, again, "a blend is made once per change")
}

func TestKeysAreValidForAnyModelName(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 1)
	for _, model := range []string{"owner/name:0123abc", "a b*c>d", "ünïcødé", ""} {
		j := finished(state.Succeeded, time.Minute, 0)
		j.Model = model
		ss[0].Observe(j)
	}
	ss[0].Flush(context.Background())
	for _, model := range []string{"owner/name:0123abc", "a b*c>d", "ünïcødé", ""} {
		total, _ := ss[0].Lookup("r", model, "", 0)
		require.NotNil(t, total, model)
		require.Equal(t, uint64(1), total.Count())
	}
}

// A model whose recent jobs take twice as long drifts: the fleet is told
// once (one writer flips the record), the route's gauge shows the ratio,
// and once the learned distribution has followed, the drift ends, once.
func TestDriftIsToldOnceAndEndsOnceFollowed(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 2)
	ctx := context.Background()
	var mu sync.Mutex
	var told []learn.Drift
	for _, s := range ss {
		s.OnDrift = func(d learn.Drift) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, d)
		}
	}
	drifts := func() []learn.Drift {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(told)
	}
	job := func(total time.Duration) *state.Job { return finished(state.Succeeded, total, 0) }
	for range 40 {
		ss[0].Observe(job(60 * time.Second))
	}
	ss[0].Flush(ctx)
	require.Empty(t, drifts(), "a steady model does not drift")

	// Twice as slow, the fleet's two processes seeing the jobs end.
	var began int
	for i := range 18 {
		s := ss[i%2]
		s.Observe(job(120 * time.Second))
		s.Flush(ctx)
		if len(drifts()) > 0 && began == 0 {
			began = i + 1
		}
	}
	require.Len(t, drifts(), 1, "told once")
	d := drifts()[0]
	require.True(t, d.Drifting)
	require.Equal(t, "owner/model:v1", d.Model)
	require.InDelta(t, 2, d.Ratio, 0.2)
	require.Contains(t, d.Sentence(), "× slower than its learned p50")
	require.LessOrEqual(t, began, 16, "within a window of the change")
	require.Eventually(t, func() bool { return ss[1].Drift("r") > 1.8 }, 5*time.Second, 10*time.Millisecond, "every process sees the drift")

	for i := 0; i < 200 && len(drifts()) < 2; i++ {
		ss[i%2].Observe(job(120 * time.Second))
		ss[i%2].Flush(ctx)
	}
	require.Len(t, drifts(), 2, "the end is told once")
	require.False(t, drifts()[1].Drifting)
	require.Contains(t, drifts()[1].Sentence(), "back within")
	require.Eventually(t, func() bool { return ss[0].Drift("r") == 1 }, 5*time.Second, 10*time.Millisecond)
	total, _ := ss[0].Lookup("r", "owner/model:v1", "", 0)
	require.InDelta(t, 120, total.Quantile(0.5).Seconds(), 15, "the learned median followed")
}

// The queue's velocity is learned fleet-wide per route from what polls saw
// of queued jobs' places, moves of zero included; too little observation
// gives no rate.
func TestQueueVelocityIsLearnedFleetWide(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 2)
	ctx := context.Background()
	ss[0].ObserveQueue("r", 3, 10*time.Second)
	ss[0].Flush(ctx)
	require.Zero(t, ss[0].QueueRate("r"), "10 s of observation is too little")

	ss[0].ObserveQueue("r", 0, 20*time.Second) // the place did not change
	ss[1].ObserveQueue("r", 6, 30*time.Second)
	ss[1].ObserveQueue("r", -1, time.Second)      // nonsense: ignored
	ss[1].ObserveQueue("r", 5, 0)                 // nonsense: ignored
	ss[1].ObserveQueue("other", 100, time.Minute) // another route
	ss[0].Flush(ctx)
	ss[1].Flush(ctx)
	for _, s := range ss {
		require.Eventually(t, func() bool {
			return math.Abs(s.QueueRate("r")-9.0/60) < 0.005
		}, 5*time.Second, 10*time.Millisecond, "9 places in 60 s, seen by every process")
	}
	require.Eventually(t, func() bool { return math.Abs(ss[0].QueueRate("other")-100.0/60) < 0.01 }, 5*time.Second, 10*time.Millisecond,
		"another route's rate, written by the other process, seen through the watch")
	require.Zero(t, ss[0].QueueRate("none"))
	total, _ := ss[0].Lookup("r", "owner/model:v1", "", 0)
	require.Nil(t, total, "a queue record is no duration record")
}

// A model whose durations are widely spread (lognormal, sigma 1: a decade
// from p10 to p90) but steady never drifts: a median of 16 strays past
// 1.5x by chance, 15 of 16 on one side of the learned median almost never.
func TestAWideSteadyModelDoesNotDrift(t *testing.T) {
	t.Parallel()
	s := fleet(t, 1)[0]
	ctx := context.Background()
	var told []learn.Drift
	s.OnDrift = func(d learn.Drift) { told = append(told, d) }
	rnd := rand.New(rand.NewPCG(7, 7))
	for i := range 2000 {
		s.Observe(finished(state.Succeeded, time.Duration(90*math.Exp(rnd.NormFloat64())*float64(time.Second)), 0))
		if i%4 == 3 {
			s.Flush(ctx)
		}
	}
	require.Empty(t, told, "no drift of a steady model")
}

// What a flush cannot write while the nats-server is down stays queued —
// durations and queue moves alike — and the next flush after the server
// is back writes it, none lost, none twice.
func TestWhatNATSCannotTakeStaysQueued(t *testing.T) {
	t.Parallel()
	srv := natstest.NewRestartable(t)
	_, js := srv.Connect(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "stats", Storage: jetstream.FileStorage})
	require.NoError(t, err)
	s := learn.New(kv, zerolog.Nop())
	for range 5 {
		s.Observe(finished(state.Succeeded, time.Minute, 0))
	}
	s.ObserveQueue("r", 4, 40*time.Second)
	s.Flush(ctx)

	srv.Stop()
	for range 3 {
		s.Observe(finished(state.Succeeded, time.Minute, 0))
	}
	s.ObserveQueue("r", 2, 20*time.Second)
	down, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	s.Flush(down) // fails: nothing is written, everything stays queued
	cancel()
	srv.Start(t)

	require.Eventually(t, func() bool {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s.Flush(fctx)
		e, err := kv.Get(fctx, learn.Key("r", "owner/model:v1", ""))
		if err != nil {
			return false
		}
		var r learn.Record
		require.NoError(t, json.Unmarshal(e.Value(), &r))
		return r.Total.Count() == 8
	}, 20*time.Second, 100*time.Millisecond, "the durations queued through the outage are written once")
	e, err := kv.Get(ctx, learn.QueueKey("r"))
	require.NoError(t, err)
	var q learn.QueueRecord
	require.NoError(t, json.Unmarshal(e.Value(), &q))
	require.InDelta(t, 6, q.Moved, 0.01, "the queue moves too (decay over seconds is negligible)")
	require.InDelta(t, 60, q.Seconds, 0.1)
}

// webhookJob is a job that expected a webhook and ended after 90 s: found
// by the webhook 'late' after the provider's completion time, or by a poll
// 'after' it.
func webhookJob(route string, by state.Source, after time.Duration) *state.Job {
	j := finished(state.Succeeded, 90*time.Second, 0)
	j.Route, j.WebhookExpected, j.DetectedBy = route, true, by
	j.DetectedAt = j.CompletedAt.Add(after)
	return j
}

// A route's webhook miss chance and lateness are learned from the jobs
// that expected a webhook, shared by the fleet, and given only once
// enough jobs are seen. A poll that found a job ended moments after the
// provider's completion time, when the webhook may still have been on its
// way, teaches nothing: counting it as a miss would make polls more
// frequent, and so beat more webhooks.
func TestWebhookReliabilityIsLearnedFleetWide(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 2)
	ctx := context.Background()
	for i := range 30 {
		ss[i%2].Observe(webhookJob("r", state.FromWebhook, 2*time.Second))
	}
	ss[0].Flush(ctx)
	ss[1].Flush(ctx)
	miss, _ := ss[0].Webhook("r")
	require.Zero(t, miss, "30 jobs are too few")

	for i := range 70 {
		switch {
		case i < 10: // missed: a poll found them 40 s after the end
			ss[i%2].Observe(webhookJob("r", state.FromPoll, 40*time.Second))
		case i < 30: // a poll 1 s after the end: the webhook may have been coming
			ss[i%2].Observe(webhookJob("r", state.FromPoll, time.Second))
		default:
			ss[i%2].Observe(webhookJob("r", state.FromWebhook, time.Second))
		}
	}
	noHook := finished(state.Succeeded, 90*time.Second, 0) // expected no webhook
	noHook.DetectedBy, noHook.DetectedAt = state.FromPoll, noHook.CompletedAt.Add(time.Minute)
	ss[0].Observe(noHook)
	ss[0].Observe(webhookJob("other", state.FromPoll, time.Minute))
	ss[0].Flush(ctx)
	ss[1].Flush(ctx)
	// 10 misses in 80 jobs, with the prior of one miss and one delivery.
	for _, s := range ss {
		require.Eventually(t, func() bool {
			miss, late := s.Webhook("r")
			return math.Abs(miss-11.0/82) < 0.01 && late >= time.Second && late <= 2200*time.Millisecond
		}, 5*time.Second, 10*time.Millisecond, "seen by every process")
	}
	miss, _ = ss[0].Webhook("other")
	require.Zero(t, miss, "another route, too few jobs")
}

// On a route with length_from, a model's durations are regressed on the
// length its jobs ask for: a job of a length seldom or never seen gets a
// distribution around its own expected time, while one of unknown length
// (and the model page, asking with none) gets the model's mix.
func TestLookupRegressesOnLength(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 2)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		l := float64(2 + i%5*2) // 2, 4, 6, 8, 10 s of video
		T := time.Duration((20 + 12*l) * math.Exp(0.15*r.NormFloat64()) * float64(time.Second))
		j := finished(state.Succeeded, T, T-5*time.Second)
		j.Length = l
		ss[i%2].Observe(j)
		if i%50 == 49 {
			ss[0].Flush(context.Background())
			ss[1].Flush(context.Background())
		}
	}
	for _, s := range ss {
		require.Eventually(t, func() bool {
			total, _ := s.Lookup("r", "owner/model:v1", "", 20)
			return total != nil && math.Abs(total.Quantile(0.5).Seconds()-260) < 30
		}, 5*time.Second, 10*time.Millisecond, "20 s, never seen: 20 + 12·20 = 260 s")
	}
	for l, want := range map[float64]float64{2: 44, 10: 140} {
		total, run := ss[0].Lookup("r", "owner/model:v1", "", l)
		require.InDelta(t, want, total.Quantile(0.5).Seconds(), want*0.12, "length %v", l)
		require.InDelta(t, want-5, run.Quantile(0.5).Seconds(), want*0.12, "length %v: run time too", l)
		spread := total.Quantile(0.9).Seconds() / total.Quantile(0.1).Seconds()
		require.Less(t, spread, 1.8, "length %v: the model's own spread (σ 0.15), not the mix of lengths", l)
	}
	mix, _ := ss[0].Lookup("r", "owner/model:v1", "", 0)
	require.Greater(t, mix.Quantile(0.9).Seconds()/mix.Quantile(0.1).Seconds(), 2.0, "unknown length: the mix")
}

// A model's failure rate counts its jobs that failed, were lost or
// expired, whether or not they ever ran (a refused create is a failure a
// model route should avoid); canceled jobs say nothing of the provider.
func TestFailuresAreLearnedFleetWide(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 2)
	for i := range 20 {
		var j *state.Job
		switch {
		case i < 4:
			j = finished(state.Failed, 10*time.Second, 0)
		case i < 6:
			j = &state.Job{ID: "refused", Route: "r", Model: "owner/model:v1", State: state.Failed} // never submitted
		case i < 8:
			j = finished(state.Lost, time.Minute, 0)
		case i < 12:
			j = finished(state.Canceled, time.Hour, 0) // says nothing
			j.CancelRequestedAt = t0
		default:
			j = finished(state.Succeeded, time.Minute, 0)
		}
		ss[i%2].Observe(j)
	}
	ss[0].Flush(context.Background())
	ss[1].Flush(context.Background())
	for _, s := range ss {
		require.Eventually(t, func() bool {
			rate, weight := s.Failures("r", "owner/model:v1")
			return math.Abs(rate-0.5) < 0.03 && weight > 14 && weight <= 16
		}, 5*time.Second, 10*time.Millisecond, "8 of 16 failed or lost")
	}
	rate, _ := ss[0].Failures("r", "other")
	require.Zero(t, rate)
}
