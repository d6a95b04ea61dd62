package providertest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Harness is what one adapter gives the conformance suite: how to build it
// against a fake, and its provider's wire shapes.
type Harness struct {
	// New builds the adapter under test against srv: srv.URL as its base
	// (with whatever path the provider's API lives under), srv.Client()
	// as its HTTP client when TLS is set, Token as its credential.
	New func(t *testing.T, srv *Server) provider.Adapter
	// TLS serves the fake over TLS, for adapters that refuse plain HTTP.
	TLS bool
	// Token is the credential New configures: every call carries it in a
	// header, never in the URL, and no error shows it.
	Token string

	// Submit is a job to submit; SubmitKey is where its create call goes
	// ("METHOD /path") and SubmitReply the provider's answer, which names
	// the remote job SubmittedID.
	Submit      provider.SubmitRequest
	SubmitKey   string
	SubmitReply Reply
	SubmittedID string

	// Ref is a job to ask about, and StatusKey where its status call goes.
	Ref       provider.Ref
	StatusKey string
	// States are the provider's documented status answers, at least one
	// for each normalized state it reports; each must map to its State.
	States []StateCase
	// NotFound is the provider's answer for a job it does not know (a 404
	// with an empty object when zero): it must be classified NotFound.
	NotFound Reply
	// Errors are more failed status answers (the provider's own error
	// bodies) and the class each must map to, beyond the suite's own.
	Errors []ErrorCase
	// BadIDs are more remote ids the adapter must refuse without a call,
	// beyond the suite's own (ids that could change the path or query).
	BadIDs []string

	// Cancels are what a provider that cancels (Info().Cancel) answers and
	// what Cancel must make of it; a provider that cannot must answer
	// ErrUnsupported without a call.
	Cancels []CancelCase
	// PollAfter is true when the adapter reads a Retry-After on a
	// successful status answer as Status.PollAfter.
	PollAfter bool
}

// StateCase is one documented status answer and what it must map to.
type StateCase struct {
	// Name names the case (the sample's file, say).
	Name string
	// Reply is the status call's answer.
	Reply Reply
	// More answers the adapter's follow-up calls, by "METHOD /path".
	More map[string]Reply
	// State is the normalized state the answer must map to.
	State state.State
	// Check, when set, checks the rest of the status.
	Check func(*testing.T, provider.Status)
	// Calls, when set, are the calls ("METHOD /path") Status must make,
	// in order, and no others.
	Calls []string
}

// ErrorCase is one failed answer and how it must be classified.
type ErrorCase struct {
	Name  string
	Reply Reply
	Class provider.Class
	// RetryAfter is the pause the error must carry.
	RetryAfter time.Duration
	// Message is a part of the provider's explanation the error must show.
	Message string
}

// CancelCase is one answer to a cancel and what Cancel must return.
type CancelCase struct {
	Name string
	// Replies answer the calls Cancel makes, by "METHOD /path".
	Replies map[string]Reply
	// State is the state Cancel must answer with.
	State state.State
	// Calls, when set, are the calls ("METHOD /path") Cancel must make,
	// in order, and no others.
	Calls []string
}

// Run puts the adapter the harness builds through the conformance suite,
// each check a subtest running in parallel with the others.
func Run(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.New, "Harness.New")
	require.NotEmpty(t, h.Token, "Harness.Token")
	require.NotEmpty(t, h.States, "Harness.States")
	checks := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"SubmitAnswered", submitAnswered},
		{"SubmitRefusals", submitRefusals},
		{"StatusMapsEachState", statusStates},
		{"StatusErrorClasses", statusErrors},
		{"UnknownJobIsNotFound", unknownJob},
		{"TimeoutIsTransient", timeout},
		{"BadIDRefusedWithoutACall", badIDs},
		{"Cancel", cancel},
		{"PollAfterHint", pollAfter},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, h)
		})
	}
}

func (h Harness) serve(t *testing.T, replies map[string]Reply) (*Server, provider.Adapter) {
	t.Helper()
	var srv *Server
	if h.TLS {
		srv = NewTLSServer(t, replies)
	} else {
		srv = NewServer(t, replies)
	}
	return srv, h.New(t, srv)
}

func submitAnswered(t *testing.T, h Harness) {
	srv, a := h.serve(t, map[string]Reply{h.SubmitKey: h.SubmitReply})
	st, err := a.Submit(context.Background(), h.Submit)
	require.NoError(t, err)
	require.Equal(t, h.SubmittedID, st.RemoteID)
	require.False(t, st.State.Terminal(), "a job just created is not finished: %s", st.State)
	require.LessOrEqual(t, len(st.RefData), provider.MaxRefData)
	reqs := srv.Requests()
	require.NotEmpty(t, reqs)
	require.Equal(t, h.SubmitKey, reqs[len(reqs)-1].Key())
	for _, r := range reqs {
		carriesToken(t, h.Token, r)
	}
}

// carriesToken checks the credential went in a header and not in the URL.
func carriesToken(t *testing.T, token string, r Request) {
	t.Helper()
	found := false
	for _, vs := range r.Header {
		for _, v := range vs {
			found = found || strings.Contains(v, token)
		}
	}
	require.True(t, found, "%s carries the credential in a header", r.Key())
	require.NotContains(t, r.Path+"?"+r.RawQuery, token, "the credential never goes in the URL")
}

// failures are the answers every provider's API can give a call, whatever
// it is, and how each must be classified.
func failures() []ErrorCase {
	return []ErrorCase{
		{Name: "429 with Retry-After", Reply: Reply{Status: 429, Header: http.Header{"Retry-After": {"7"}}, Body: []byte(`{}`)}, Class: provider.RateLimited, RetryAfter: 7 * time.Second},
		{Name: "401", Reply: Reply{Status: 401}, Class: provider.Auth},
		{Name: "403", Reply: Reply{Status: 403}, Class: provider.Auth},
		{Name: "500", Reply: Reply{Status: 500, Body: []byte("oops")}, Class: provider.Transient},
		{Name: "502 HTML", Reply: Reply{Status: 502, Body: []byte("<html>bad gateway</html>")}, Class: provider.Transient},
		{Name: "503", Reply: Reply{Status: 503}, Class: provider.Transient},
		{Name: "truncated JSON", Reply: OK([]byte(`{"id":`)), Class: provider.Transient},
		{Name: "HTML with 200", Reply: OK([]byte(`<html>maintenance</html>`)), Class: provider.Transient},
		{Name: "binary", Reply: OK([]byte{0, 0xff, 0xfe, '{'}), Class: provider.Transient},
		{Name: "oversized", Reply: OK(bytes.Repeat([]byte(" "), httpapi.DefaultMaxBody+1)), Class: provider.Transient, Message: "larger than"},
	}
}

func submitRefusals(t *testing.T, h Harness) {
	for _, c := range failures() {
		_, a := h.serve(t, map[string]Reply{"*": c.Reply})
		_, err := a.Submit(context.Background(), h.Submit)
		classified(t, h, c, err)
	}
}

func statusStates(t *testing.T, h Harness) {
	seen := map[state.State]bool{}
	for _, c := range h.States {
		replies := map[string]Reply{h.StatusKey: c.Reply}
		for k, r := range c.More {
			replies[k] = r
		}
		srv, a := h.serve(t, replies)
		st, err := a.Status(context.Background(), h.Ref)
		require.NoError(t, err, c.Name)
		require.Equal(t, c.State, st.State, c.Name)
		require.Equal(t, h.Ref.ID, st.RemoteID, c.Name)
		require.Equal(t, h.StatusKey, srv.Requests()[0].Key(), c.Name)
		for _, r := range srv.Requests() {
			carriesToken(t, h.Token, r)
		}
		if c.Calls != nil {
			require.Equal(t, c.Calls, keys(srv), c.Name)
		}
		if c.Check != nil {
			c.Check(t, st)
		}
		seen[c.State] = true
	}
	require.True(t, seen[state.Queued] || seen[state.Running], "no status answer maps to an unfinished state")
	for _, s := range []state.State{state.Succeeded, state.Failed} {
		require.True(t, seen[s], "no status answer maps to %s", s)
	}
}

func statusErrors(t *testing.T, h Harness) {
	for _, c := range append(failures(), h.Errors...) {
		_, a := h.serve(t, map[string]Reply{"*": c.Reply})
		_, err := a.Status(context.Background(), h.Ref)
		classified(t, h, c, err)
	}
}

// classified checks err is the classified failure c describes.
func classified(t *testing.T, h Harness, c ErrorCase, err error) {
	t.Helper()
	require.Error(t, err, c.Name)
	var pe *provider.Error
	require.True(t, errors.As(err, &pe), "%s: a *provider.Error, got %T %v", c.Name, err, err)
	require.Equal(t, c.Class, provider.ClassOf(err), "%s: %v", c.Name, err)
	require.Equal(t, c.RetryAfter, provider.RetryAfterOf(err), c.Name)
	require.Contains(t, err.Error(), c.Message, c.Name)
	require.NotContains(t, err.Error(), h.Token, "%s: the credential never reaches an error", c.Name)
}

func unknownJob(t *testing.T, h Harness) {
	rep := h.NotFound
	if rep.Status == 0 {
		rep = Reply{Status: http.StatusNotFound, Body: []byte(`{}`)}
	}
	_, a := h.serve(t, map[string]Reply{"*": rep})
	_, err := a.Status(context.Background(), h.Ref)
	require.Equal(t, provider.NotFound, provider.ClassOf(err), "%v", err)
}

func timeout(t *testing.T, h Harness) {
	srv, a := h.serve(t, nil)
	srv.Hang("*")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := a.Status(ctx, h.Ref)
	require.Equal(t, provider.Transient, provider.ClassOf(err), "%v", err)
	require.True(t, provider.IsTimeout(err), "%v", err)
}

func badIDs(t *testing.T, h Harness) {
	srv, a := h.serve(t, nil)
	for _, id := range append([]string{"", "../x", "a/../../b", "x?y=1", "x#y", "x y", "x\r\ny"}, h.BadIDs...) {
		ref := h.Ref
		ref.ID = id
		_, err := a.Status(context.Background(), ref)
		require.Equal(t, provider.Invalid, provider.ClassOf(err), "%q: %v", id, err)
	}
	require.Empty(t, srv.Requests())
}

func cancel(t *testing.T, h Harness) {
	srv, a := h.serve(t, nil)
	if !a.Info().Cancel {
		require.Empty(t, h.Cancels, "Info says the provider cannot cancel")
		_, err := a.Cancel(context.Background(), h.Ref)
		require.ErrorIs(t, err, provider.ErrUnsupported)
		require.Empty(t, srv.Requests())
		return
	}
	require.NotEmpty(t, h.Cancels, "Info says the provider cancels: Harness.Cancels")
	for _, c := range h.Cancels {
		srv, a := h.serve(t, c.Replies)
		st, err := a.Cancel(context.Background(), h.Ref)
		require.NoError(t, err, c.Name)
		require.Equal(t, c.State, st.State, c.Name)
		require.Equal(t, h.Ref.ID, st.RemoteID, c.Name)
		if c.Calls != nil {
			require.Equal(t, c.Calls, keys(srv), c.Name)
		}
	}
}

func pollAfter(t *testing.T, h Harness) {
	if !h.PollAfter {
		t.Skip("the adapter reads no poll-after hint")
	}
	for _, c := range h.States {
		if c.State.Terminal() {
			continue
		}
		rep := c.Reply
		rep.Header = http.Header{"Retry-After": {"3"}}
		_, a := h.serve(t, map[string]Reply{h.StatusKey: rep})
		st, err := a.Status(context.Background(), h.Ref)
		require.NoError(t, err, c.Name)
		require.Equal(t, 3*time.Second, st.PollAfter, c.Name)
		return
	}
	t.Fatal("no unfinished state among Harness.States")
}

// keys lists the "METHOD /path" of the requests srv saw, in order.
func keys(srv *Server) []string {
	var k []string
	for _, r := range srv.Requests() {
		k = append(k, r.Key())
	}
	return k
}
