package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/state"
)

// record reads job id's record through the API.
func (f *fleet) record(t *testing.T, id string) state.Job {
	t.Helper()
	var j state.Job
	require.Equal(t, http.StatusOK, f.call(t, http.MethodGet, "/v1/jobs/"+id, nil, &j))
	return j
}

// eventually waits until the job's record satisfies ok.
func (f *fleet) eventually(t *testing.T, id, what string, ok func(j state.Job) bool) state.Job {
	t.Helper()
	var j state.Job
	require.Eventually(t, func() bool {
		j = state.Job{}
		return f.call(t, http.MethodGet, "/v1/jobs/"+id, nil, &j) == http.StatusOK && ok(j)
	}, live, 50*time.Millisecond, "job %s: %s (last %+v)", id, what, j)
	return j
}

// submitExpiring submits a slow job that expires after a second and
// waits until it has.
func (f *fleet) submitExpiring(t *testing.T, key string) string {
	t.Helper()
	var a struct{ ID string }
	require.Equal(t, http.StatusAccepted, f.call(t, http.MethodPost, "/v1/jobs", map[string]any{
		"v": 1, "route": dev.RouteName, "model": slowModel, "idempotency_key": key, "timeout_s": 1, "input": map[string]any{"prompt": key},
	}, &a))
	f.eventually(t, a.ID, "expired", func(j state.Job) bool { return j.State == state.Expired })
	return a.ID
}

// actionSubtests drive the console's actions on jobs, on the operator's
// tab: the submit form, bulk cancel on a selection and on a filter, and
// a resubmission with its links.
func actionSubtests(t *testing.T, f *fleet, b0 *tab) {
	t.Run("SubmitFormLandsOnTheJob", func(t *testing.T) {
		b := b0.on(t)
		b.open("#/jobs", "#submit-job")
		b.do("open the form", chromedp.Click(chromedp.CSS("#submit-job")))
		b.waitJS("the routes to submit to", `document.querySelector('#s-route option')`, live)
		// The input must be a JSON object before anything is sent.
		b.do("fill", chromedp.SetValue(chromedp.CSS("#s-model"), quickModel), chromedp.SetValue(chromedp.CSS("#s-input"), `{"prompt": "unterminated`),
			chromedp.Click(chromedp.CSS("#s-submit")))
		b.waitJS("the input refused", `document.querySelector('#submit-error[data-field=input]:not([hidden])') && document.querySelector('#s-input[aria-invalid=true]')`, live)
		require.Contains(t, b.text("#submit-error"), "not JSON")
		b.do("fill", chromedp.SetValue(chromedp.CSS("#s-input"), `["not", "an object"]`), chromedp.Click(chromedp.CSS("#s-submit")))
		b.waitJS("the input refused", `document.querySelector('#submit-error').textContent.includes('must be a JSON object')`, live)
		// The front door's refusal names its field, which the form marks.
		b.do("fill", chromedp.SetValue(chromedp.CSS("#s-id"), "not an id!"), chromedp.SetValue(chromedp.CSS("#s-input"), `{"prompt": "from the form"}`),
			chromedp.Click(chromedp.CSS("#s-submit")))
		b.waitJS("the id refused", `document.querySelector('#submit-error[data-field=id]:not([hidden])') && document.querySelector('#s-id[aria-invalid=true]')`, live)
		require.Contains(t, b.text("#submit-error"), "id: ")
		eval[bool](b, `(document.querySelector('#s-id').value = '') === ''`)
		b.do("fill", chromedp.SetValue(chromedp.CSS("#s-key"), "console-form-1"),
			chromedp.SetValue(chromedp.CSS("#s-reason"), "trying the form"))
		b.shot("submit")
		b.do("submit", chromedp.Click(chromedp.CSS("#s-submit")))
		b.waitJS("the new job's page", `location.hash.startsWith('#/jobs/') && (document.querySelector('#submitted-by')||{textContent:''}).textContent.includes('trying the form')`, live)
		require.Contains(t, b.text("#submitted-by"), actName)
		id, err := url.PathUnescape(eval[string](b, `location.hash.slice('#/jobs/'.length).split('?')[0]`))
		require.NoError(t, err)
		j := f.record(t, id)
		require.Equal(t, "console-form-1", j.IdempotencyKey)
		require.Equal(t, actName, j.SubmittedBy)
		require.Equal(t, "trying the form", j.SubmitReason)
		b.shot("job-submitted")
	})

	t.Run("BulkCancelOnASelection", func(t *testing.T) {
		b := b0.on(t)
		ids := []string{f.submit(t, slowModel, "console-bulk-1"), f.submit(t, slowModel, "console-bulk-2")}
		b.open("#/jobs?model="+url.QueryEscape(slowModel), "#bulk-bar")
		b.waitJS("both jobs listed", fmt.Sprintf(`%s && %s`, rowState(ids[0]), rowState(ids[1])), live)
		for _, id := range ids {
			b.do("select "+id, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#job-rows tr[data-id=%q] input.sel`, id))))
		}
		require.Equal(t, "Cancel 2 selected", b.text("#bulk-cancel"))
		b.shot("jobs-selected")
		b.do("cancel the selection", chromedp.Click(chromedp.CSS("#bulk-cancel")))
		b.waitJS("the count in the dialog", `document.querySelector('dialog.dialog .bulk-count[data-matched="2"]')`, live)
		require.ElementsMatch(t, ids, eval[[]string](b, `[...document.querySelectorAll('dialog.dialog ul.sample li')].map(li => li.textContent)`))
		b.confirm("bulk-cancel", "cleaning up after the test")
		b.waitJS("the result", `document.querySelector('#bulk-result[data-accepted="2"][data-skipped="0"]')`, live)
		b.waitJS("the selection cleared", `document.querySelectorAll('#job-rows input.sel:checked').length === 0`, live)
		for _, id := range ids {
			j := f.eventually(t, id, "canceled", func(j state.Job) bool { return j.State == state.Canceled })
			require.Equal(t, actName, j.CancelRequestedBy)
			require.Equal(t, "cleaning up after the test", j.CancelReason)
		}
		b.waitJS("the rows canceled", fmt.Sprintf(`%s === 'canceled' && %s === 'canceled'`, rowState(ids[0]), rowState(ids[1])), live)
		b.shot("jobs-bulk-result")
	})

	t.Run("ALiveUpdateKeepsTheTickBox", func(t *testing.T) {
		b := b0.on(t)
		id := f.submit(t, slowModel, "console-tick-1")
		b.open("#/jobs?model="+url.QueryEscape(slowModel), "#bulk-bar")
		b.waitJS("the job listed", rowState(id), live)
		box := fmt.Sprintf(`#job-rows tr[data-id=%q] input.sel`, id)
		b.do("select "+id, chromedp.Click(chromedp.CSS(box)), chromedp.Focus(chromedp.CSS(box)))
		require.True(t, eval[bool](b, fmt.Sprintf(`(window.ticked = document.querySelector(%s)) === document.activeElement`, js(box))))
		// The row changes under the user's hand: the box they ticked, and
		// the focus on it, stay (a click aimed at it must not miss).
		require.Equal(t, http.StatusAccepted, f.call(t, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", map[string]any{"reason": "a live update"}, nil))
		b.waitJS("the row canceled", rowState(id)+` === 'canceled'`, live)
		require.True(t, eval[bool](b, `window.ticked.isConnected && window.ticked.checked && window.ticked === document.activeElement`), "the update kept the tick box")
		require.Equal(t, "Cancel 1 selected", b.text("#bulk-cancel"))
		b.do("clear the selection", chromedp.Click(chromedp.CSS(box)))
	})

	t.Run("CancelAllMatchingAsksAgainWhenTheCountChanged", func(t *testing.T) {
		b := b0.on(t)
		first := f.submit(t, slowModel, "console-bulk-3")
		filter := "model=" + url.QueryEscape(slowModel) + "&state=pending,queued,running"
		b.open("#/jobs?"+filter, "#bulk-bar")
		b.waitJS("the job listed", rowState(first), live)
		b.do("cancel all matching", chromedp.Click(chromedp.CSS("#bulk-cancel-matching")))
		b.waitJS("the count in the dialog", `document.querySelector('dialog.dialog .bulk-count')`, live)
		n, err := strconv.Atoi(eval[string](b, `document.querySelector('dialog.dialog .bulk-count').dataset.matched`))
		require.NoError(t, err)
		require.Positive(t, n)
		// One more job matches before the confirm reaches the front door.
		late := f.submit(t, slowModel, "console-bulk-4")
		require.Eventually(t, func() bool {
			var page struct{ Total int }
			return f.call(t, http.MethodGet, "/v1/jobs?"+filter, nil, &page) == http.StatusOK && page.Total == n+1
		}, live, 50*time.Millisecond)
		b.do("confirm", chromedp.SendKeys(chromedp.CSS("dialog.dialog textarea[name=reason]"), "draining the slow model"),
			chromedp.Click(chromedp.CSS("dialog.dialog [data-confirm]")))
		b.waitJS("the dialog again, with the new count", fmt.Sprintf(`document.querySelector('dialog.dialog .bulk-count[data-matched="%d"]') && document.querySelector('dialog.dialog .form-error:not([hidden])')`, n+1), live)
		require.Equal(t, "draining the slow model", eval[string](b, `document.querySelector('dialog.dialog textarea[name=reason]').value`), "the reason kept")
		b.shot("dialog-bulk-count-changed")
		b.do("confirm again", chromedp.Click(chromedp.CSS("dialog.dialog [data-confirm]")), chromedp.WaitNotPresent(chromedp.CSS("dialog.dialog")))
		b.waitJS("the result", fmt.Sprintf(`document.querySelector('#bulk-result[data-accepted="%d"]')`, n+1), live)
		j := f.eventually(t, late, "canceled", func(j state.Job) bool { return j.State == state.Canceled })
		require.Equal(t, "draining the slow model", j.CancelReason)
	})

	t.Run("ResubmitLinksBothWays", func(t *testing.T) {
		b := b0.on(t)
		old := f.submitExpiring(t, "console-expire-1")
		b.open("#/jobs/"+old+"?route="+dev.RouteName, "#resubmit")
		b.do("resubmit", chromedp.Click(chromedp.CSS("#resubmit")), chromedp.WaitVisible(chromedp.CSS("dialog.dialog textarea[name=reason]")))
		b.shot("dialog-resubmit")
		b.do("confirm", chromedp.SendKeys(chromedp.CSS("dialog.dialog textarea[name=reason]"), "the provider had an outage"),
			chromedp.Click(chromedp.CSS("dialog.dialog [data-confirm]")))
		if f.record(t, old).RemoteID != "" {
			// It reached its provider: Pollux kept no input, and the dialog asks for it.
			b.waitJS("the input asked for", `document.querySelector('dialog.dialog #resubmit-input') && document.querySelector('dialog.dialog .form-error:not([hidden])')`, live)
			b.do("input", chromedp.SetValue(chromedp.CSS("#resubmit-input"), `{"prompt": "again"}`))
			b.shot("dialog-resubmit-input")
			b.do("confirm", chromedp.Click(chromedp.CSS("dialog.dialog [data-confirm]")))
		}
		b.waitJS("the new job's page", `location.hash.startsWith('#/jobs/') && !location.hash.startsWith('#/jobs/`+old+`?') && document.querySelector('#resubmit-of a')`, live)
		require.Equal(t, old, b.text("#resubmit-of a"))
		nu := eval[string](b, `decodeURIComponent(location.hash.slice('#/jobs/'.length).split('?')[0])`)
		b.shot("job-resubmission")
		j := f.record(t, nu)
		require.Equal(t, old, j.ResubmitOf)
		require.Equal(t, actName, j.SubmittedBy)
		require.Equal(t, "the provider had an outage", j.SubmitReason)
		f.eventually(t, old, "linked to "+nu, func(j state.Job) bool { return len(j.ResubmittedAs) == 1 && j.ResubmittedAs[0] == nu })
		b.do("back to the old job", chromedp.Click(chromedp.CSS("#resubmit-of a")))
		b.waitJS("the link back", fmt.Sprintf(`(document.querySelector('#resubmitted-as a')||{}).textContent === %q`, nu), live)
		b.shot("job-resubmitted")
	})
}
