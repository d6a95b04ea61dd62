package frontdoor_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

const (
	tokenOps    = "tok-opsopsopsopsopsopsopsops"
	tokenViewer = "tok-viewviewviewviewviewview"
)

// bulkDoor is a front door with an index, an acting token named ops and a
// read-only one, and at most max jobs per bulk action.
func bulkDoor(t *testing.T, max int) *door {
	t.Helper()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenOps + " act name=ops app=team\n" + tokenViewer + " read app=team\n"))
	require.NoError(t, err)
	return setupWith(t, frontdoor.Config{Tokens: tokens, MaxBulk: max}, withIndex)
}

// job stores a job's record, as ingest would, and publishes its event for
// the index; the index has it when this returns.
func (d *door) job(t *testing.T, j state.Job) {
	t.Helper()
	j.CreatedAt, j.App = time.Now().UTC().Add(-time.Minute), cmp.Or(j.App, testApp)
	_, created, err := d.jobs.Intake().Accept(context.Background(), &j)
	require.NoError(t, err)
	require.True(t, created)
	d.event(t, j, 1)
	require.Eventually(t, func() bool { e, ok := d.index.Get(j.ID); return ok && e.State == j.State }, 10*time.Second, 10*time.Millisecond)
}

// intake returns the messages on an intake subject, oldest first.
func (d *door) intake(t *testing.T, subject string) []map[string]any {
	t.Helper()
	ctx := context.Background()
	info, err := d.res.Intake.Info(ctx, jetstream.WithSubjectFilter(subject))
	require.NoError(t, err)
	n := int(info.State.Subjects[subject])
	if n == 0 {
		return nil
	}
	var out []map[string]any
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := d.res.Intake.GetMsg(ctx, seq)
		if err != nil || m.Subject != subject {
			continue
		}
		var v map[string]any
		require.NoError(t, json.Unmarshal(m.Data, &v))
		out = append(out, v)
	}
	require.Len(t, out, n)
	return out
}

func (d *door) bulk(t *testing.T, action, body, token string) reply {
	t.Helper()
	return d.do(t, http.MethodPost, "/v1/jobs/"+action, body, map[string]string{"Authorization": "Bearer " + token})
}

// A bulk cancel by filter is a dry run until confirmed with the count it
// matches then; confirmed, it cancels each job through the single cancel's
// message, saying who and why. A read-only token may not.
func TestBulkCancelByFilter(t *testing.T) {
	t.Parallel()
	d := bulkDoor(t, 0)
	for i := range 4 {
		d.job(t, state.Job{ID: fmt.Sprintf("run-%d", i), Route: route, Model: "m", State: state.Running, RemoteID: fmt.Sprint("rem-", i)})
	}
	d.job(t, state.Job{ID: "other-run", Route: "other", Model: "m", State: state.Running, RemoteID: "rem-o"})
	d.job(t, state.Job{ID: "done", Route: route, Model: "m", State: state.Succeeded, RemoteID: "rem-d"})
	filter := `"filter":{"route":"sim","state":"running"},"reason":"provider incident"`

	requireError(t, d.bulk(t, "cancel", "{"+filter+",\"confirm\":4}", tokenViewer), http.StatusForbidden, frontdoor.CodeForbidden, "")

	dry := d.bulk(t, "cancel", "{"+filter+"}", tokenOps)
	require.Equal(t, http.StatusOK, dry.status, "body %s", dry.raw)
	require.Equal(t, true, dry.body["dry_run"])
	require.EqualValues(t, 4, dry.body["matched"])
	require.ElementsMatch(t, []any{"run-0", "run-1", "run-2", "run-3"}, dry.body["sample"])
	require.Empty(t, d.intake(t, d.ns.Cancel(route)), "a dry run cancels nothing")

	requireError(t, d.bulk(t, "cancel", "{"+filter+",\"confirm\":3}", tokenOps), http.StatusConflict, frontdoor.CodeConfirmMismatch, "confirm")
	require.Empty(t, d.intake(t, d.ns.Cancel(route)), "a mismatched confirm cancels nothing")

	done := d.bulk(t, "cancel", "{"+filter+",\"confirm\":4}", tokenOps)
	require.Equal(t, http.StatusOK, done.status, "body %s", done.raw)
	require.Equal(t, false, done.body["dry_run"])
	require.EqualValues(t, 4, done.body["accepted"])
	msgs := d.intake(t, d.ns.Cancel(route))
	require.Len(t, msgs, 4)
	for _, m := range msgs {
		require.Equal(t, "ops", m["by"])
		require.Equal(t, "provider incident", m["reason"])
	}
	require.Empty(t, d.intake(t, d.ns.Cancel("other")), "the filter's route only")
}

// A selection names its jobs; each gets its own outcome, and a bad filter
// or a body with both is refused.
func TestBulkCancelSelection(t *testing.T) {
	t.Parallel()
	d := bulkDoor(t, 0)
	d.job(t, state.Job{ID: "a", Route: route, Model: "m", State: state.Running, RemoteID: "rem-a"})
	d.job(t, state.Job{ID: "b", Route: route, Model: "m", State: state.Failed, RemoteID: "rem-b"})
	r := d.bulk(t, "cancel", `{"ids":["a","b","nope","a"],"confirm":3}`, tokenOps)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	var res frontdoor.BulkResult
	require.NoError(t, json.Unmarshal(r.raw, &res))
	require.Equal(t, 3, res.Matched)
	require.Equal(t, 1, res.Accepted)
	require.Equal(t, 2, res.Skipped)
	require.Equal(t, []frontdoor.BulkItem{
		{ID: "a", Outcome: "accepted"},
		{ID: "b", Outcome: "skipped", Code: frontdoor.CodeJobTerminal, Why: "job b has finished (failed)"},
		{ID: "nope", Outcome: "skipped", Code: frontdoor.CodeJobNotFound, Why: "no job nope"},
	}, res.Results)

	requireError(t, d.bulk(t, "cancel", `{"ids":["a"],"filter":{"state":"running"}}`, tokenOps), http.StatusBadRequest, frontdoor.CodeInvalidBody, "")
	requireError(t, d.bulk(t, "cancel", `{"filter":{}}`, tokenOps), http.StatusBadRequest, frontdoor.CodeInvalidField, "filter")
	requireError(t, d.bulk(t, "cancel", `{"filter":{"colour":"red"}}`, tokenOps), http.StatusBadRequest, frontdoor.CodeInvalidField, "filter")
	requireError(t, d.bulk(t, "cancel", `{"filter":{"state":"sleepy"}}`, tokenOps), http.StatusBadRequest, frontdoor.CodeInvalidParameter, "filter.state")
	requireError(t, d.bulk(t, "cancel", `{"ids":["a/b"]}`, tokenOps), http.StatusBadRequest, frontdoor.CodeInvalidField, "ids")
	// A job may be named "cancel": GET reads it.
	requireError(t, d.do(t, http.MethodGet, "/v1/jobs/cancel", "", map[string]string{"Authorization": "Bearer " + tokenOps}), http.StatusNotFound, frontdoor.CodeJobNotFound, "")
}

// One call acts on at most MaxBulk jobs: more, by selection or filter,
// is refused before anything is done.
func TestBulkIsBounded(t *testing.T) {
	t.Parallel()
	d := bulkDoor(t, 2)
	for i := range 3 {
		d.job(t, state.Job{ID: fmt.Sprintf("run-%d", i), Route: route, Model: "m", State: state.Running, RemoteID: fmt.Sprint("rem-", i)})
	}
	requireError(t, d.bulk(t, "cancel", `{"filter":{"state":"running"}}`, tokenOps), http.StatusUnprocessableEntity, frontdoor.CodeTooManyJobs, "")
	requireError(t, d.bulk(t, "cancel", `{"ids":["run-0","run-1","run-2"],"confirm":3}`, tokenOps), http.StatusUnprocessableEntity, frontdoor.CodeTooManyJobs, "")
	require.Empty(t, d.intake(t, d.ns.Cancel(route)))
	r := d.bulk(t, "cancel", `{"ids":["run-0","run-1"],"confirm":2}`, tokenOps)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	require.EqualValues(t, 2, r.body["limit"])
}

// A failed, lost or expired job is resubmitted as a new job: the same
// route, model, metadata and input (kept, or given), its deadline window
// afresh, an id derived from the old one, resubmit_of and who and why.
// Once the new job is accepted both records name each other, and a
// repeated resubmission is the same job.
func TestResubmit(t *testing.T) {
	t.Parallel()
	d := bulkDoor(t, 0)
	now := time.Now().UTC()
	d.job(t, state.Job{ID: "lost1", Route: route, Model: "m", State: state.Lost, Input: json.RawMessage(`{"prompt":"kite"}`),
		Metadata: map[string]string{"order": "42"}, Deadline: now.Add(29 * time.Minute), IdempotencyKey: "k1"})
	d.job(t, state.Job{ID: "failed1", Route: route, Model: "m", State: state.Failed, RemoteID: "rem-f"})
	d.job(t, state.Job{ID: "ok1", Route: route, Model: "m", State: state.Succeeded, RemoteID: "rem-s"})
	d.job(t, state.Job{ID: "cx1", Route: route, Model: "m", State: state.Canceled, Input: json.RawMessage(`{}`)})
	auth := map[string]string{"Authorization": "Bearer " + tokenOps}

	r := d.do(t, http.MethodPost, "/v1/jobs/lost1/resubmit", `{"reason":"provider back"}`, auth)
	require.Equal(t, http.StatusAccepted, r.status, "body %s", r.raw)
	require.Equal(t, "lost1-r1", r.body["id"])
	msgs := d.intake(t, d.ns.Submit(route))
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, "lost1-r1", m["id"])
	require.Equal(t, "lost1", m["resubmit_of"])
	require.Equal(t, "ops", m["by"])
	require.Equal(t, "provider back", m["reason"])
	require.Equal(t, map[string]any{"prompt": "kite"}, m["input"])
	require.Equal(t, map[string]any{"order": "42"}, m["metadata"])
	require.NotContains(t, m, "idempotency_key", "the old key would make the provider answer with the old job")
	require.Equal(t, testApp, m["app"], "the old job's app")
	require.InDelta(t, 30*60, m["timeout_s"], 5, "the deadline's window, counted afresh")

	// Ingest accepts it; then both records say so.
	sub, err := events.DecodeSubmit(mustJSON(t, m))
	require.NoError(t, err)
	_, _, err = d.jobs.Intake().Accept(context.Background(), &state.Job{ID: sub.ID, Route: route, Model: sub.Model, State: state.Pending,
		ResubmitOf: sub.ResubmitOf, SubmittedBy: sub.By, SubmitReason: sub.Reason, CreatedAt: now, App: sub.App})
	require.NoError(t, err)
	old := d.do(t, http.MethodGet, "/v1/jobs/lost1", "", auth)
	require.Equal(t, []any{"lost1-r1"}, old.body["resubmitted_as"])
	neu := d.do(t, http.MethodGet, "/v1/jobs/lost1-r1", "", auth)
	require.Equal(t, "lost1", neu.body["resubmit_of"])
	require.Equal(t, "ops", neu.body["submitted_by"])
	require.Equal(t, "provider back", neu.body["submit_reason"])

	// Again: the same job, nothing published.
	r = d.do(t, http.MethodPost, "/v1/jobs/lost1/resubmit", ``, auth)
	require.Equal(t, http.StatusAccepted, r.status, "body %s", r.raw)
	require.Equal(t, "lost1-r1", r.body["id"])
	require.Len(t, d.intake(t, d.ns.Submit(route)), 1)

	requireError(t, d.do(t, http.MethodPost, "/v1/jobs/ok1/resubmit", ``, auth), http.StatusConflict, frontdoor.CodeNotResubmittable, "")
	requireError(t, d.do(t, http.MethodPost, "/v1/jobs/cx1/resubmit", ``, auth), http.StatusConflict, frontdoor.CodeNotResubmittable, "")
	requireError(t, d.do(t, http.MethodPost, "/v1/jobs/failed1/resubmit", ``, auth), http.StatusConflict, frontdoor.CodeInputNotKept, "input")
	requireError(t, d.do(t, http.MethodPost, "/v1/jobs/failed1/resubmit", ``, map[string]string{"Authorization": "Bearer " + tokenViewer}), http.StatusForbidden, frontdoor.CodeForbidden, "")
	r = d.do(t, http.MethodPost, "/v1/jobs/failed1/resubmit", `{"input":{"prompt":"again"}}`, auth)
	require.Equal(t, http.StatusAccepted, r.status, "body %s", r.raw)
	require.Equal(t, "failed1-r1", r.body["id"])
}

// A bulk resubmit by filter resubmits what it can and says why not for
// the rest.
func TestBulkResubmit(t *testing.T) {
	t.Parallel()
	d := bulkDoor(t, 0)
	d.job(t, state.Job{ID: "e1", Route: route, Model: "m", State: state.Expired, Input: json.RawMessage(`{"p":1}`)})
	d.job(t, state.Job{ID: "e2", Route: route, Model: "m", State: state.Expired, RemoteID: "rem-2"})
	d.job(t, state.Job{ID: "s1", Route: route, Model: "m", State: state.Succeeded, RemoteID: "rem-3"})
	dry := d.bulk(t, "resubmit", `{"filter":{"state":"expired"}}`, tokenOps)
	require.EqualValues(t, 2, dry.body["matched"], "body %s", dry.raw)
	r := d.bulk(t, "resubmit", `{"filter":{"state":"expired"},"confirm":2,"reason":"retry the expired"}`, tokenOps)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	var res frontdoor.BulkResult
	require.NoError(t, json.Unmarshal(r.raw, &res))
	require.Equal(t, 1, res.Accepted)
	byID := map[string]frontdoor.BulkItem{}
	for _, it := range res.Results {
		byID[it.ID] = it
	}
	require.Equal(t, frontdoor.BulkItem{ID: "e1", Outcome: "accepted", NewID: "e1-r1"}, byID["e1"])
	require.Equal(t, frontdoor.CodeInputNotKept, byID["e2"].Code)
	msgs := d.intake(t, d.ns.Submit(route))
	require.Len(t, msgs, 1)
	require.Equal(t, "retry the expired", msgs[0]["reason"])
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
