package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
)

// live is how long a change may take to reach the page: the stack's work
// and the event's way through /v1/stream or the job's event stream.
const live = 20 * time.Second

// login signs the tab in with token and waits for the overview.
func (b *tab) login(token, role string) {
	b.t.Helper()
	b.open("#/", "#token")
	b.shot("login")
	b.do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login-submit")))
	b.waitJS("the "+role+" session", fmt.Sprintf(`document.querySelector('#role[data-role=%q]') && document.querySelector('section.route')`, role), live)
}

// confirm fills the open confirmation dialog's reason, saves a screenshot
// of it as dialog-<name>, and confirms it.
func (b *tab) confirm(name, reason string) {
	b.t.Helper()
	b.do("confirm", chromedp.WaitVisible(chromedp.CSS("dialog.dialog textarea[name=reason]")))
	b.shot("dialog-" + name)
	b.do("confirm", chromedp.SendKeys(chromedp.CSS("dialog.dialog textarea[name=reason]"), reason),
		chromedp.Click(chromedp.CSS("dialog.dialog [data-confirm]")), chromedp.WaitNotPresent(chromedp.CSS("dialog.dialog")))
}

// cancelable is the JavaScript for a job page whose cancel button is
// enabled: its record has loaded and the job has not finished.
const cancelable = `document.querySelector('#cancel') && !document.querySelector('#cancel').disabled`

// rowState is the JavaScript for the state a job's row in the list shows.
func rowState(id string) string {
	return fmt.Sprintf(`(document.querySelector('#job-rows tr[data-id=%q]')||{dataset:{}}).dataset.state`, id)
}

// An operator signs in, and every page works end to end against a running
// stack: the overview, the live list and its filters, a job's timeline,
// cancel, pause and resume; and a state-changing request without the CSRF
// token is refused.
func TestOperatorConsole(t *testing.T) {
	t.Parallel()
	f := startFleet(t)
	b := newTab(t, f.HTTPURL)
	b.login(actToken, "admin")

	t.Run("OverviewShowsEveryRoute", func(t *testing.T) {
		b := b.on(t)
		var routes struct {
			Routes []struct{ Name string } `json:"routes"`
		}
		require.Equal(t, http.StatusOK, f.call(t, http.MethodGet, "/v1/routes", nil, &routes))
		require.NotEmpty(t, routes.Routes)
		for _, r := range routes.Routes {
			b.waitJS("route "+r.Name, fmt.Sprintf(`document.querySelector('section.route[data-route=%q] .chip[data-state=running]')`, r.Name), live)
		}
		require.Equal(t, len(routes.Routes), eval[int](b, `document.querySelectorAll('section.route').length`))
		require.Contains(t, b.text("#who"), actName)
	})

	var quick string
	t.Run("SubmittedJobAppearsAndEndsLive", func(t *testing.T) {
		b := b.on(t)
		b.open("#/jobs", "#live.on")
		before := eval[int](b, `document.querySelectorAll('#job-rows tr[data-id]').length`)
		quick = f.submit(t, quickModel, "console-quick-1")
		// No reload: the row comes from /v1/stream and changes in place.
		b.waitJS("the new job's row", fmt.Sprintf(`%s !== undefined`, rowState(quick)), live)
		b.shot("jobs-live")
		b.waitJS("the job's terminal state", fmt.Sprintf(`%s === 'succeeded'`, rowState(quick)), live)
		require.Equal(t, before+1, eval[int](b, `document.querySelectorAll('#job-rows tr[data-id]').length`))
		require.Equal(t, "/console/", eval[string](b, `location.pathname`))
		b.shot("jobs")
	})

	t.Run("FilterNarrowsTheList", func(t *testing.T) {
		b := b.on(t)
		other := f.submit(t, otherModel, "console-other-1")
		b.open("#/jobs", "#live.on")
		b.waitJS("both models listed", fmt.Sprintf(`%s && %s`, rowState(quick), rowState(other)), live)
		b.do("filter by model", chromedp.SendKeys(chromedp.CSS("#f-model"), otherModel), chromedp.Click(chromedp.CSS("form.filters button[type=submit]")))
		b.waitJS("only the other model", fmt.Sprintf(`!%s && %s`, rowState(quick), rowState(other)), live)
		models := eval[[]string](b, `[...document.querySelectorAll('#job-rows tr[data-id] td.model')].map(td => td.textContent)`)
		require.NotEmpty(t, models)
		for _, m := range models {
			require.Equal(t, otherModel, m)
		}
		require.Contains(t, eval[string](b, `location.hash`), "model="+url.QueryEscape(otherModel))
		b.waitJS("the state counts", `document.querySelector('button.chip-toggle[data-state=succeeded] .count').textContent !== ''`, live)
		// The state counts are the model's, as the list: they add up to its total.
		b.waitJS("the counts of the filtered list", `[...document.querySelectorAll('button.chip-toggle .count')].reduce((a, c) => a + Number(c.textContent || 0), 0) === parseInt(document.querySelector('#total').textContent)`, live)
		b.shot("jobs-filtered")
		// A state nothing is in empties the list; the search finds one job.
		b.do("filter by state", chromedp.Click(chromedp.CSS("button.chip-toggle[data-state=lost]")))
		b.waitJS("no lost job", `document.querySelector('#job-rows tr.empty')`, live)
		b.open("#/jobs?q="+quick, "#job-rows")
		b.waitJS("the searched job alone", fmt.Sprintf(`%s && document.querySelectorAll('#job-rows tr[data-id]').length === 1`, rowState(quick)), live)
	})

	t.Run("JobPageShowsItsTimeline", func(t *testing.T) {
		b := b.on(t)
		// Its outbound webhook deliveries, as package notify keeps them.
		kv, err := events.EnsureBucket(t.Context(), f.js, events.Default.OutboxBucketConfig(events.Options{}))
		require.NoError(t, err)
		dl, err := json.Marshal(events.OutboxDelivery{Endpoint: "app", State: events.OutboxDelivering, Seq: 4, Attempts: 2, Total: 5,
			Last: "HTTP 503", LastAt: time.Now().UTC(), NextAt: time.Now().Add(time.Minute).UTC()})
		require.NoError(t, err)
		_, err = kv.Put(t.Context(), events.OutboxKey(quick, "app"), dl)
		require.NoError(t, err)
		b.open("#/jobs/"+quick+"?route="+dev.RouteName, "#record dl")
		b.waitJS("the job's outbound webhooks", `document.querySelector('#deliveries li[data-endpoint=app][data-state=delivering]')`, live)
		require.Contains(t, b.text("#deliveries"), "HTTP 503")
		require.Contains(t, b.text("#deliveries"), "5 in all")
		b.waitJS("the terminal event", `document.querySelector('li.ev[data-type=succeeded]') && document.querySelector('#tl-state.done')`, live)
		types := eval[[]string](b, `[...document.querySelectorAll('li.ev')].map(li => li.dataset.type)`)
		require.Equal(t, events.EventSubmitted, types[0])
		require.Equal(t, events.EventSucceeded, types[len(types)-1])
		require.Contains(t, b.text("#record"), "console-quick-1")
		require.True(t, eval[bool](b, `document.querySelector('#cancel').disabled`), "a finished job cannot be canceled")
		b.shot("job")
	})

	t.Run("CancelShowsAsAnEvent", func(t *testing.T) {
		b := b.on(t)
		slow := f.submit(t, slowModel, "console-slow-1")
		b.open("#/jobs/"+slow+"?route="+dev.RouteName, "#timeline")
		b.waitJS("the job running at the provider", `document.querySelector('li.ev[data-type=submitted]') && `+cancelable, live)
		b.shot("job-running")
		b.do("cancel", chromedp.Click(chromedp.CSS("#cancel")))
		b.confirm("cancel", "the customer withdrew the order")
		b.waitJS("the canceled event", `document.querySelector('li.ev[data-type=canceled]')`, live)
		b.waitJS("the reason in the record", `document.querySelector('#record').textContent.includes('the customer withdrew the order')`, live)
		b.shot("job-canceled")
	})

	t.Run("ActionWithoutCSRFTokenIsRefused", func(t *testing.T) {
		b := b.on(t)
		slow := f.submit(t, slowModel, "console-slow-2")
		b.open("#/jobs/"+slow+"?route="+dev.RouteName, "#timeline")
		b.waitJS("the job's record", cancelable, live)
		// The page's own session cookie goes with these; only the header differs.
		post := func(header string) int {
			return eval[int](b, fmt.Sprintf(`fetch('/v1/jobs/%s/cancel', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json'%s}, body: '{}'}).then(r => r.status)`, slow, header))
		}
		require.Equal(t, http.StatusForbidden, post(""))
		require.Equal(t, http.StatusForbidden, post(`, 'X-CSRF-Token': 'not-the-token'`))
		require.Equal(t, http.StatusForbidden, eval[int](b, `fetch('/v1/routes/`+dev.RouteName+`/pause', {method: 'POST', credentials: 'same-origin', body: '{}'}).then(r => r.status)`))
		var j struct{ State, CancelReason string }
		require.Equal(t, http.StatusOK, f.call(t, http.MethodGet, "/v1/jobs/"+slow, nil, &j))
		require.NotEqual(t, "canceled", j.State)
		require.Nil(t, f.routeEvent(t), "no pause came of it")
	})

	t.Run("ModelPageDrawsThePlan", func(t *testing.T) {
		b := b.on(t)
		b.open("#/models/"+dev.RouteName+"/"+url.PathEscape(quickModel), "#compare")
		require.Contains(t, b.text("h1"), quickModel)
		require.Positive(t, eval[int](b, `document.querySelectorAll('svg.dist line.poll').length`), "the plan's polls drawn")
		// A few jobs learned: the cold-start table is in force, and the
		// learned plan shown as what comes after 20 samples.
		var m struct{ Learned bool }
		require.Equal(t, http.StatusOK, f.call(t, http.MethodGet, "/v1/routes/"+dev.RouteName+"/models/"+url.PathEscape(quickModel), nil, &m))
		require.False(t, m.Learned)
		require.Contains(t, b.text("#plan-in-force"), "In force now, the cold-start table")
		require.Contains(t, b.text("#plan-learned"), "After 20 samples")
		require.Contains(t, b.text("#compare"), "the cold-start table (in force now)")
		// A fixed interval with the same mean delay polls less than the
		// cold-start table here: the page says so, not "0.2× fewer".
		require.NotRegexp(t, `\b0\.\d× fewer`, b.text("#compare"))
		b.shot("model")
	})

	t.Run("TrackFormFollowsAJobSubmittedElsewhere", func(t *testing.T) {
		b := b.on(t)
		remote := f.createAtProvider(t, quickModel)
		b.open("#/track", "#t-route")
		b.waitJS("the routes to track on", `document.querySelector('#t-route option')`, live)
		b.do("track", chromedp.SendKeys(chromedp.CSS("#t-model"), quickModel), chromedp.SendKeys(chromedp.CSS("#t-remote"), remote))
		b.shot("track")
		b.do("track", chromedp.Click(chromedp.CSS("#t-submit")))
		b.waitJS("the tracked job's page", `location.hash.startsWith('#/jobs/') && document.querySelector('#timeline')`, live)
		b.waitJS("the tracked job's end", `document.querySelector('li.ev[data-type=succeeded]')`, live)
		require.Contains(t, b.text("#record"), remote)
		b.shot("job-tracked")
	})

	t.Run("OverviewCountsParkedChecks", func(t *testing.T) {
		b := b.on(t)
		// A check parked an hour away, as a poller parks one: the census
		// counts it, and the route's card says so.
		ns, id := events.Default, "console-parked-1"
		m := nats.NewMsg(ns.Parked(dev.RouteName, id))
		m.Data = []byte(`{"v":1,"job_id":"console-parked-1"}`)
		m.Header.Set(jetstream.ScheduleHeader, events.ScheduleAt(time.Now().Add(time.Hour)))
		m.Header.Set(jetstream.ScheduleTargetHeader, ns.Check(dev.RouteName, id))
		_, err := f.js.PublishMsg(t.Context(), m)
		require.NoError(t, err)
		t.Cleanup(func() {
			s, err := f.js.Stream(context.Background(), ns.ChecksStream())
			require.NoError(t, err)
			require.NoError(t, s.Purge(context.Background(), jetstream.WithPurgeSubject(m.Subject)))
		})
		b.open("#/", "section.route")
		b.waitJS("the parked check counted", fmt.Sprintf(`[...document.querySelectorAll('section.route[data-route=%q] .metric-sub')].some(e => e.textContent.endsWith(', 1 parked'))`, dev.RouteName), live)
		b.shot("overview-parked")
	})

	actionSubtests(t, f, b)

	// Last: once resumed, held-back work returns within
	// route.OperatorRecheck, which later steps would wait for.
	t.Run("PauseAndResumeShowAsEvents", func(t *testing.T) {
		b := b.on(t)
		b.open("#/", "[data-action=pause]")
		b.do("pause", chromedp.Click(chromedp.CSS("[data-action=pause]")))
		b.confirm("pause", "provider maintenance window")
		b.waitJS("the operator's pause", fmt.Sprintf(`(document.querySelector('.pause-line[data-kind=operator]')||{textContent:''}).textContent.includes(%q)`, actName), live)
		require.Contains(t, b.text(".pause-line[data-kind=operator]"), "provider maintenance window")
		ev := f.routeEvent(t)
		require.NotNil(t, ev)
		require.Equal(t, events.EventRoutePaused, ev.Type)
		require.Equal(t, actName, ev.By)
		require.Equal(t, "provider maintenance window", ev.Reason)
		require.WithinDuration(t, time.Now().Add(30*time.Minute), ev.Until, time.Minute, "the dialog's default: 30 minutes")
		b.shot("overview-paused")

		b.do("resume", chromedp.Click(chromedp.CSS("[data-action=resume]")))
		b.confirm("resume", "maintenance over")
		b.waitJS("the route running again", `document.querySelector('section.route .chip[data-state=running]') && !document.querySelector('.pause-line')`, live)
		ev = f.routeEvent(t)
		require.Equal(t, events.EventRouteResumed, ev.Type)
		require.Equal(t, "maintenance over", ev.Reason)
		require.Equal(t, actName, ev.By)
	})
}

// A read-only token signs in and sees everything, but every action is
// disabled, and the API refuses one made by hand.
func TestReadOnlyConsole(t *testing.T) {
	t.Parallel()
	f := startFleet(t)
	id := f.submit(t, slowModel, "console-readonly-1")
	// Some history for the reader to look at: jobs that succeed and fail.
	for i := range 12 {
		f.submit(t, []string{quickModel, flakyModel}[i%2], fmt.Sprintf("console-readonly-busy-%d", i))
	}
	b := newTab(t, f.HTTPURL)
	b.login(readToken, "read")
	require.Contains(t, b.text("#who"), readName)
	require.Zero(t, eval[int](b, `[...document.querySelectorAll('[data-action]')].filter(e => !e.disabled && e.offsetParent).length`), "no enabled pause or resume")
	b.waitJS("the busy jobs done", `Number((document.querySelector('section.route .legend-item:has(.s-running) b')||{textContent:'0'}).textContent) <= 1 && document.querySelector('section.route .legend-item:has(.s-succeeded)')`, live)
	b.shot("overview-readonly")
	b.open("#/jobs", "#live.on")
	b.shot("jobs-readonly")
	require.Zero(t, eval[int](b, `document.querySelectorAll('#submit-job, #bulk-bar, input.sel, #sel-all').length`), "no submit, selection or bulk action")

	// A job that could be resubmitted: the reader is not offered it.
	expired := f.submitExpiring(t, "console-readonly-expired")
	b.open("#/jobs/"+expired+"?route="+dev.RouteName, "#record dl")
	require.Zero(t, eval[int](b, `document.querySelectorAll('#resubmit').length`), "no resubmit")
	b.open("#/submit", ".notice.warn")
	require.Zero(t, eval[int](b, `document.querySelectorAll('#s-submit, #submit-form').length`), "no submit form")

	b.open("#/jobs/"+id+"?route="+dev.RouteName, "#timeline")
	b.waitJS("the job's record", `document.querySelector('li.ev[data-type=submitted]')`, live)
	require.True(t, eval[bool](b, `document.querySelector('#cancel').disabled`))
	b.shot("job-readonly")

	b.open("#/track", "#t-submit")
	require.True(t, eval[bool](b, `document.querySelector('#t-submit').disabled`))

	// With the session's own CSRF token, the request is well formed: the
	// role alone refuses it.
	status := eval[int](b, `fetch('/console/session').then(r => r.json()).then(s => fetch('/v1/jobs/`+id+`/cancel', {method: 'POST', headers: {'X-CSRF-Token': s.csrf, 'Content-Type': 'application/json'}, body: '{}'})).then(r => r.status)`)
	require.Equal(t, http.StatusForbidden, status)
	status = eval[int](b, `fetch('/console/session').then(r => r.json()).then(s => fetch('/v1/routes/`+dev.RouteName+`/pause', {method: 'POST', headers: {'X-CSRF-Token': s.csrf, 'Content-Type': 'application/json'}, body: '{"reason":"x"}'})).then(r => r.status)`)
	require.Equal(t, http.StatusForbidden, status)
	require.Nil(t, f.routeEvent(t))
}

// Without a tokens file (pollux serve on loopback) there is no login and
// the console may act, still with the CSRF token the front door hands it:
// a request from the page without one is refused all the same.
func TestOpenFrontDoorConsole(t *testing.T) {
	t.Parallel()
	f := startFleetWith(t, nil, true)
	id := f.submit(t, slowModel, "console-open-1")
	done := f.submit(t, otherModel, "console-open-2")
	b := newTab(t, f.HTTPURL)
	b.open("#/", "section.route")
	require.Zero(t, eval[int](b, `document.querySelectorAll('#token').length`), "no login")
	require.Equal(t, "act", eval[string](b, `document.querySelector('#role').dataset.role`))
	require.Contains(t, b.text("#who"), "no login")
	// A poll-only route: its webhook coverage is no alert, it says so.
	var j struct{ State string }
	require.Eventually(t, func() bool { f.call(t, http.MethodGet, "/v1/jobs/"+done, nil, &j); return j.State == "succeeded" }, live, 50*time.Millisecond)
	b.waitJS("a completion counted", `document.querySelector('.summary .stat-value') && [...document.querySelectorAll('.summary .stat')].some(s => s.textContent.startsWith('Completions') && s.querySelector('.stat-value').textContent === '1')`, live)
	require.Equal(t, "poll-only", eval[string](b, `[...document.querySelectorAll('.summary .stat')].find(s => s.textContent.startsWith('Webhook coverage')).querySelector('.stat-value').textContent`))
	require.Equal(t, "poll-only", eval[string](b, `[...document.querySelectorAll('section.route .metric')].find(m => m.textContent.startsWith('Webhook coverage')).querySelector('.metric-value').textContent`))
	b.shot("overview-open")

	b.open("#/jobs/"+id+"?route="+dev.RouteName, "#timeline")
	b.waitJS("the job's record", cancelable, live)
	status := eval[int](b, `fetch('/v1/jobs/`+id+`/cancel', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status)`)
	require.Equal(t, http.StatusForbidden, status, "a page's request without the CSRF token")
	b.do("cancel", chromedp.Click(chromedp.CSS("#cancel")))
	b.confirm("cancel-open", "")
	b.waitJS("the canceled event", `document.querySelector('li.ev[data-type=canceled]')`, live)

	t.Run("PollsPerCompletionCountsCompletions", func(t *testing.T) {
		b := b.on(t)
		// The hour holds one completion and one canceled job: both jobs'
		// polls count, over the one completion (state.Tally), not over
		// the two jobs ended.
		var fl struct {
			Routes []struct {
				Activity struct {
					Ended, Completions int
					Minutes            []struct{ Polls int }
				}
			}
		}
		require.Eventually(t, func() bool {
			return f.call(t, http.MethodGet, "/v1/routes", nil, &fl) == http.StatusOK && len(fl.Routes) == 1 &&
				fl.Routes[0].Activity.Ended == 2 && fl.Routes[0].Activity.Completions == 1
		}, live, 50*time.Millisecond, "the completion and the cancel counted")
		polls := 0
		for _, m := range fl.Routes[0].Activity.Minutes {
			polls += m.Polls
		}
		require.Positive(t, polls, "a poll-only route polls its jobs")
		want := strconv.Itoa(polls) // over one completion
		b.open("#/", "section.route")
		b.waitJS("polls per completion", fmt.Sprintf(`[...document.querySelectorAll('section.route .metric')].find(m => m.textContent.startsWith('Polls / completion')).querySelector('.metric-value').textContent === %q`, want), live)
		require.Equal(t, want, eval[string](b, `[...document.querySelectorAll('.summary .stat')].find(s => s.textContent.startsWith('Polls / completion')).querySelector('.stat-value').textContent`))
		require.Contains(t, eval[string](b, `[...document.querySelectorAll('.summary .stat')].find(s => s.textContent.startsWith('Completions')).textContent`), "1 more ended")
		b.shot("overview-polls-per-completion")
	})

	t.Run("DNSRebindingIsRefused", func(t *testing.T) {
		// A page on a foreign name that resolves to 127.0.0.1 is, to the
		// browser, the same origin as the front door it reaches. The
		// attacker's server serves the page (served here by the browser's
		// request interception); its requests then reach the front door.
		port := f.HTTPURL[strings.LastIndex(f.HTTPURL, ":")+1:]
		foreign := "http://rebind.example:" + port
		// Chromium's Local Network Access checks would refuse the page's
		// requests on their own (it counts the served page as public and
		// 127.0.0.1 as local); other browsers have none, so they are off:
		// what refuses the attack here is the front door.
		r := newTab(t, foreign, chromedp.Flag("host-resolver-rules", "MAP rebind.example 127.0.0.1"),
			chromedp.Flag("disable-features", "LocalNetworkAccessChecks"))
		r.serve("*/attack.html", rebindPage)
		r.do("load the attacker's page", chromedp.Navigate(foreign+"/attack.html"))
		got := eval[rebindAttack](r, `window.attack`)
		r.waitJS("the attack's outcome shown", `document.querySelector('#out').dataset.done`, live)
		r.shot("rebind-refused")
		require.Equal(t, rebindAttack{Session: http.StatusMisdirectedRequest, Code: "host_not_allowed", Pause: http.StatusMisdirectedRequest, Jobs: http.StatusMisdirectedRequest}, got)
		require.Nil(t, f.routeEvent(t), "the route was not paused")

		// The same script on the front door's own name does what it says:
		// what refused it above is the name, nothing in the browser.
		self := "http://localhost:" + port
		r.do("load the page on a loopback name", chromedp.Navigate(self+"/attack.html"))
		got = eval[rebindAttack](r, `window.attack`)
		require.Equal(t, rebindAttack{Session: http.StatusOK, CSRF: true, Pause: http.StatusOK, Jobs: http.StatusOK}, got)
		ev := f.routeEvent(t)
		require.NotNil(t, ev)
		require.Equal(t, "console", ev.By)
		require.Equal(t, http.StatusOK, f.call(t, http.MethodPost, "/v1/routes/"+dev.RouteName+"/resume", map[string]any{"reason": "test over"}, nil))
	})
}

// rebindPage is a DNS-rebinding attacker's page: it reads the CSRF token
// of the front door it now reaches, pauses the route with it and reads
// the jobs, and shows what it got.
const rebindPage = `<!doctype html><title>rebind.example</title><h1>rebind.example</h1><pre id="out">attacking…</pre>
<script>
window.attack = (async () => {
  const got = {};
  const s = await fetch('/console/session');
  got.session = s.status;
  const body = await s.json().catch(() => ({}));
  got.csrf = !!body.csrf;
  got.code = (body.error || {}).code || '';
  const p = await fetch('/v1/routes/` + dev.RouteName + `/pause', {method: 'POST',
    headers: {'Content-Type': 'application/json', 'X-CSRF-Token': body.csrf || ''}, body: JSON.stringify({reason: 'rebound', for: '30m'})});
  got.pause = p.status;
  got.jobs = (await fetch('/v1/jobs')).status;
  const out = document.querySelector('#out');
  out.textContent = location.origin + ' got ' + JSON.stringify(got, null, 2) + (body.error ? '\n\n' + body.error.message : '');
  out.dataset.done = 'yes';
  return got;
})();
</script>`

// rebindAttack is what the attacker's page got.
type rebindAttack struct {
	Session int    `json:"session"`
	CSRF    bool   `json:"csrf"`
	Code    string `json:"code"`
	Pause   int    `json:"pause"`
	Jobs    int    `json:"jobs"`
}
