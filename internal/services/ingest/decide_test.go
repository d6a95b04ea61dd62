package ingest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

func TestNextStep(t *testing.T) {
	t.Parallel()
	now := time.Now()
	base := func() *state.Job { return &state.Job{ID: "j", Route: "r", State: state.Pending, IntakeSeq: 7} }
	for name, tc := range map[string]struct {
		edit func(*state.Job)
		want step
	}{
		"fresh":                   {func(*state.Job) {}, stepSubmit},
		"answered without a job":  {func(j *state.Job) { j.SubmitAttempts, j.LastError = 1, "HTTP 503" }, stepSubmit},
		"another route's id":      {func(j *state.Job) { j.Route = "other" }, stepReject},
		"another message's job":   {func(j *state.Job) { j.IntakeSeq = 8 }, stepDuplicate},
		"submitted":               {func(j *state.Job) { j.RemoteID, j.State = "x", state.Queued }, stepResume},
		"finished":                {func(j *state.Job) { j.RemoteID, j.State = "x", state.Succeeded }, stepFinished},
		"failed at the create":    {func(j *state.Job) { j.State = state.Failed }, stepFinished},
		"canceled first":          {func(j *state.Job) { j.CancelRequestedAt = now }, stepCancel},
		"in doubt":                {func(j *state.Job) { j.SubmitInDoubt = true }, stepInDoubt},
		"in doubt, then canceled": {func(j *state.Job) { j.SubmitInDoubt, j.CancelRequestedAt = true, now }, stepCancel},
		"another route first":     {func(j *state.Job) { j.Route, j.IntakeSeq = "other", 8 }, stepReject},
	} {
		j := base()
		tc.edit(j)
		require.Equal(t, tc.want, nextStep(j, "r", 7), name)
	}
}

func TestFailed(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	for name, tc := range map[string]struct {
		err  error
		want outcome
	}{
		"invalid input":       {&provider.Error{Class: provider.Invalid, HTTPStatus: 422}, outRefused},
		"rate limited":        {&provider.Error{Class: provider.RateLimited, HTTPStatus: 429}, outPaused},
		"bad token":           {&provider.Error{Class: provider.Auth, HTTPStatus: 401}, outPaused},
		"5xx answered":        {&provider.Error{Class: provider.Transient, HTTPStatus: 503}, outAnswered},
		"retry-after only":    {&provider.Error{Class: provider.Transient, RetryAfter: time.Second}, outAnswered},
		"never sent":          {dial, outAnswered},
		"never sent, wrapped": {fmt.Errorf("submit: %w", dial), outAnswered},
		"not found":           {&provider.Error{Class: provider.NotFound, HTTPStatus: 404}, outAnswered},
		"timeout":             {context.DeadlineExceeded, outInDoubt},
		"connection reset":    {&net.OpError{Op: "read", Err: errors.New("reset")}, outInDoubt},
		"unreadable answer":   {&provider.Error{Class: provider.Transient, Message: "bad JSON"}, outInDoubt},
	} {
		require.Equal(t, tc.want, failed(tc.err), name)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := &state.Job{AttemptedAt: at}
	timeout := 30 * time.Second
	for name, tc := range map[string]struct {
		info    provider.Info
		canFind bool
		now     time.Time
		want    resolution
	}{
		"cannot tell":                     {provider.Info{}, false, at.Add(time.Hour), resolveLost},
		"cannot tell, too soon":           {provider.Info{}, false, at.Add(timeout), resolveWait},
		"deduplicates":                    {provider.Info{Idempotent: true}, false, at.Add(time.Hour), resolveRetry},
		"deduplicates, too soon":          {provider.Info{Idempotent: true}, false, at, resolveWait},
		"can find, too soon":              {provider.Info{}, true, at.Add(timeout), resolveWait},
		"can find, once the call is over": {provider.Info{}, true, at.Add(timeout + doubtMargin), resolveFind},
		"finding wins over retrying":      {provider.Info{Idempotent: true}, true, at.Add(time.Hour), resolveFind},
	} {
		got, until := resolve(j, tc.info, tc.canFind, timeout, tc.now, time.Time{})
		require.Equal(t, tc.want, got, name)
		if got == resolveWait {
			require.Equal(t, at.Add(timeout+min(timeout, doubtMargin)), until, name)
		}
	}
}

// An attempt made before NATS came back waits reconnectGrace past the
// reconnect however long its call is over: its process may be landing
// the answer it held. One made after the reconnect does not.
func TestResolveWaitsOutAReconnect(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := &state.Job{AttemptedAt: at}
	timeout := 5 * time.Second
	back := at.Add(time.Minute)
	got, until := resolve(j, provider.Info{}, false, timeout, back.Add(time.Second), back)
	require.Equal(t, resolveWait, got)
	require.Equal(t, back.Add(reconnectGrace), until)
	got, _ = resolve(j, provider.Info{}, false, timeout, back.Add(reconnectGrace), back)
	require.Equal(t, resolveLost, got, "the grace over")
	got, _ = resolve(j, provider.Info{}, false, timeout, at.Add(time.Hour), at.Add(-time.Second))
	require.Equal(t, resolveLost, got, "an attempt after the reconnect: its call's timeout alone")
}

func TestCancelNext(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		j         state.Job
		canCancel bool
		want      cancelStep
	}{
		"running":     {state.Job{RemoteID: "x", State: state.Running}, true, cancelCall},
		"finished":    {state.Job{RemoteID: "x", State: state.Succeeded}, true, cancelFinished},
		"unsubmitted": {state.Job{State: state.Pending}, true, cancelUnsubmitted},
		"unsupported": {state.Job{RemoteID: "x", State: state.Running}, false, cancelUnsupported},
	} {
		require.Equal(t, tc.want, cancelNext(&tc.j, tc.canCancel), name)
	}
}

func TestJobID(t *testing.T) {
	t.Parallel()
	stored := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, "mine", jobID("r", &events.Submit{ID: "mine", IdempotencyKey: "k"}, 3, stored))
	require.Equal(t, events.KeyID("r", "k"), jobID("r", &events.Submit{IdempotencyKey: "k"}, 3, stored))
	require.Equal(t, events.MessageID(3, stored), jobID("r", &events.Submit{}, 3, stored))
}

// A rejected message's rejection lands on the id the client can compute:
// its own, else its idempotency key's (or its remote id's, for a track
// request) on the route, whatever the key's length; else the one the
// stored message gives; a cancel that names no usable id lands on "_".
func TestRejectionID(t *testing.T) {
	t.Parallel()
	stored := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	msg := events.MessageID(7, stored)
	long := strings.Repeat("k", events.MaxKeyLen+1)
	for name, tc := range map[string]struct {
		kind, route, data, want string
	}{
		"an id":                {events.KindSubmit, "r", `{"id":"mine","model":7}`, "mine"},
		"an idempotency key":   {events.KindSubmit, "r", `{"idempotency_key":"order-1","model":7}`, events.KeyID("r", "order-1")},
		"an overlong key":      {events.KindSubmit, "r", `{"idempotency_key":"` + long + `","model":"m"}`, events.KeyID("r", long)},
		"a remote id":          {events.KindTrack, "r", `{"remote_id":"abc"}`, events.KeyID("r", "remote:abc")},
		"an overlong remote":   {events.KindTrack, "r", `{"remote_id":"` + long + `"}`, events.KeyID("r", "remote:"+long)},
		"a bad id, a good key": {events.KindSubmit, "r", `{"id":"a b","idempotency_key":"k"}`, events.KeyID("r", "k")},
		"nothing":              {events.KindSubmit, "r", `{"model":"m"}`, msg},
		"not json":             {events.KindSubmit, "r", `nope`, msg},
		"an unusable route":    {events.KindSubmit, "no route!", `{"idempotency_key":"k"}`, msg},
		"a cancel's key":       {events.KindCancel, "r", `{"idempotency_key":"k"}`, "_"},
		"a cancel's bad id":    {events.KindCancel, "r", `{"id":"a b"}`, "_"},
		"a cancel, not json":   {events.KindCancel, "r", `nope`, "_"},
		"a cancel's id":        {events.KindCancel, "r", `{"id":"mine","reason":7}`, "mine"},
	} {
		require.Equal(t, tc.want, rejectionID(tc.kind, tc.route, []byte(tc.data), 7, stored), name)
	}
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r := &route.Route{Name: "r", Deadline: time.Hour, MaxDeadline: 2 * time.Hour}
	d, err := deadline(r, time.Time{}, 0, now)
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Hour), d, "the route's default")
	d, err = deadline(r, time.Time{}, 90, now)
	require.NoError(t, err)
	require.Equal(t, now.Add(90*time.Second), d)
	_, err = deadline(r, now.Add(-time.Second), 0, now)
	var fe *events.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "deadline", fe.Field)
	_, err = deadline(r, now.Add(3*time.Hour), 0, now)
	require.ErrorContains(t, err, "max_deadline")
}
