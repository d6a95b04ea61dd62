package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, which scripts/system-packages installs.
const chromiumPath = "/usr/bin/chromium"

// tab is a headless chromium tab a test drives: the browser, and the
// test (or subtest) that drives it now, which its failures fail.
type tab struct {
	*browser
	t *testing.T
}

// browser is the chromium a tab lives in.
type browser struct {
	ctx   context.Context
	base  string // the front door's base URL
	shots string // the test's screenshot directory

	mu     sync.Mutex
	errors []string // uncaught script errors
}

// on returns the tab driven by t (a subtest).
func (b *tab) on(t *testing.T) *tab { return &tab{browser: b.browser, t: t} }

// listen records the page's uncaught script errors and logs what it
// writes to its console.
func (b *browser) listen(t *testing.T, ev any) {
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg = d.Exception.Description
		}
		b.mu.Lock()
		b.errors = append(b.errors, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
		b.mu.Unlock()
	case *runtime.EventConsoleAPICalled:
		var parts []string
		for _, a := range e.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				parts = append(parts, string(a.Value))
			}
		}
		t.Logf("console.%s: %s", e.Type, strings.Join(parts, " "))
	}
}

// newTab starts a headless chromium with a fresh profile and a 1366×768
// window (and the extra options), stopped when t ends. A missing chromium
// fails the test: run scripts/system-packages.
func newTab(t *testing.T, base string, extra ...chromedp.ExecAllocatorOption) *tab {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the console's browser tests need %s: run scripts/system-packages (Debian: apt-get install chromium): %v", chromiumPath, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 768),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tb := &tab{browser: &browser{base: base, shots: t.TempDir()}, t: t}
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) { tb.listen(t, ev) }))
	tb.ctx = ctx
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		// A script error on any page fails the test that drove it.
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for _, e := range tb.errors {
			t.Errorf("the page threw: %s", e)
		}
	})
	// Start the browser now, on the tab's own context (a browser started on
	// a shorter-lived one ends with it), so that a failure to start names
	// itself.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	return tb
}

// do runs actions in order, failing the test on the first error.
func (b *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// open loads the console at hash (#/jobs, ...) afresh and waits for sel.
// (Navigating to the page's own URL would be a fragment navigation that
// loads nothing.)
func (b *tab) open(hash, sel string) {
	b.t.Helper()
	b.do("open "+hash, chromedp.Navigate("about:blank"), chromedp.Navigate(b.base+"/console/"+hash), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// waitJS waits until the JavaScript expression is truthy.
func (b *tab) waitJS(what, expr string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.shot("failed-" + strings.NewReplacer(" ", "-", "/", "-").Replace(what))
		b.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// eval evaluates a JavaScript expression and decodes its value into v.
func eval[T any](b *tab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// text is the text of the first element sel matches ("" when none).
func (b *tab) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%s)||{}).textContent||""`, js(sel)))
}

// js quotes s as a JavaScript string.
func js(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// shot saves a screenshot of the whole page as name.png in the test's
// temporary directory and, when POLLUX_SCREENSHOTS names a directory, there
// too, so a human can look at every page the tests drove.
func (b *tab) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	dirs := []string{b.shots}
	if d := os.Getenv("POLLUX_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.t.Fatal(err)
		}
		p := filepath.Join(d, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			b.t.Fatal(err)
		}
		b.t.Logf("screenshot: %s", p)
	}
}

// serve answers the tab's requests for URLs matching pattern (Chrome's
// Fetch patterns: * and ?) with the HTML page, as that page's own server
// would, until the test ends; nothing else is touched, so the page's own
// requests reach the network.
func (b *tab) serve(pattern, page string) {
	b.t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern}}}); err != nil {
		cancel()
		b.t.Fatalf("intercepting %s: %v", pattern, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range paused {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
				RequestID: ev.RequestID, ResponseCode: 200, Body: []byte(page),
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "text/html; charset=utf-8"}},
			})
		}
	}()
	b.t.Cleanup(func() {
		cancel()
		<-done
	})
}
