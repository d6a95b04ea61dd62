package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/platform/problem"
	"github.com/pollux-dev/pollux/pkg/state"
)

// FrontDoor is how the commands that read the HTTP front door reach it.
type FrontDoor struct {
	HTTPURL   string `name:"http-url" env:"POLLUX_HTTP_URL" default:"http://127.0.0.1:8081" help:"The front door's base URL."`
	TokenFile string `name:"token-file" env:"POLLUX_HTTP_TOKEN_FILE" type:"path" help:"File whose first line is the bearer token (a line of the tokens file will do)."`
	Token     string `name:"token" env:"POLLUX_HTTP_TOKEN" help:"The bearer token (prefer the variable or --token-file: a flag shows in the process list)."`
}

// token returns the bearer token to send ("" for none).
func (f FrontDoor) token() (string, error) {
	if f.Token != "" || f.TokenFile == "" {
		return f.Token, nil
	}
	b, err := os.ReadFile(f.TokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			return strings.Fields(line)[0], nil
		}
	}
	return "", fmt.Errorf("--token-file %s: no token in it", f.TokenFile)
}

// get reads path (with query) from the front door into v.
func (f FrontDoor) get(ctx context.Context, path string, query url.Values, v any) error {
	return f.call(ctx, http.MethodGet, path, query, nil, v)
}

// post sends body as JSON to path and decodes a 2xx answer into v.
func (f FrontDoor) post(ctx context.Context, path string, body, v any) error {
	return f.call(ctx, http.MethodPost, path, nil, body, v)
}

// call makes a request of the front door — path with query, body as JSON
// when not nil, the token's — and decodes a 2xx answer into v; any other
// is an error that says what the front door said.
func (f FrontDoor) call(ctx context.Context, method, path string, query url.Values, body, v any) error {
	tok, err := f.token()
	if err != nil {
		return err
	}
	u := strings.TrimRight(f.HTTPURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("--http-url: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the front door at %s: %w (pollux serve runs one; elsewhere set --http-url or POLLUX_HTTP_URL)", f.HTTPURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("the front door at %s: %w", f.HTTPURL, err)
	}
	if resp.StatusCode/100 != 2 {
		var p problem.Body
		if json.Unmarshal(data, &p) != nil || p.Error.Message == "" {
			return fmt.Errorf("the front door at %s answered %s", f.HTTPURL, resp.Status)
		}
		msg := p.Error.Message
		if p.Error.Code == frontdoor.CodeUnauthorized {
			msg += " (set POLLUX_HTTP_TOKEN or --token-file)"
		}
		return fmt.Errorf("the front door at %s: %s (%s)", f.HTTPURL, msg, p.Error.Code)
	}
	return json.Unmarshal(data, v)
}

// JobsCmd is `pollux jobs`: a page of jobs from a front door's index.
type JobsCmd struct {
	FrontDoor `embed:""`
	Route     string   `name:"route" env:"POLLUX_JOBS_ROUTE" help:"Only this route's jobs."`
	State     []string `name:"state" env:"POLLUX_JOBS_STATE" sep:"," help:"Only jobs in these states (comma-separated: running,queued)."`
	Model     string   `name:"model" env:"POLLUX_JOBS_MODEL" help:"Only this model's jobs."`
	Since     string   `name:"since" env:"POLLUX_JOBS_SINCE" help:"Only jobs created after this: a duration ago (1h) or an RFC 3339 time."`
	Before    string   `name:"before" env:"POLLUX_JOBS_BEFORE" help:"Only jobs created before this: a duration ago (10m) or an RFC 3339 time."`
	Search    string   `name:"search" env:"POLLUX_JOBS_SEARCH" help:"Only the job whose id, idempotency key or remote id is exactly this."`
	Limit     int      `name:"limit" env:"POLLUX_JOBS_LIMIT" default:"50" help:"Jobs per page (1-500)."`
	Cursor    string   `name:"cursor" env:"POLLUX_JOBS_CURSOR" help:"The page after the one that printed this cursor."`
	JSON      bool     `name:"json" env:"POLLUX_JOBS_JSON" help:"Print the page as the front door's JSON."`
}

// Run prints a page of jobs, newest first.
func (c *JobsCmd) Run(g *Globals) error {
	now := time.Now()
	q := url.Values{}
	for k, v := range map[string]string{"route": c.Route, "model": c.Model, "q": c.Search, "cursor": c.Cursor, "state": strings.Join(c.State, ",")} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for _, t := range []struct{ flag, value, param string }{{"since", c.Since, "created_after"}, {"before", c.Before, "created_before"}} {
		if t.value == "" {
			continue
		}
		at, err := when(t.value, now)
		if err != nil {
			return fmt.Errorf("--%s: %w", t.flag, err)
		}
		q.Set(t.param, at.UTC().Format(time.RFC3339Nano))
	}
	if c.Limit < 1 || c.Limit > 500 {
		return fmt.Errorf("--limit: must be from 1 to 500 (got %d)", c.Limit)
	}
	q.Set("limit", strconv.Itoa(c.Limit))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var page frontdoor.JobList
	if err := c.get(ctx, "/v1/jobs", q, &page); err != nil {
		return err
	}
	if c.JSON {
		return json.NewEncoder(g.Stdout).Encode(page)
	}
	w := tabwriter.NewWriter(g.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tROUTE\tMODEL\tSTATE\tAGE\tPOLLS\tREMOTE ID")
	for _, e := range page.Jobs {
		st := string(e.State)
		if e.Rejected {
			st = "rejected"
		}
		remote := e.RemoteID
		if remote == "" && e.WaitingFor != "" && e.State == state.Pending {
			remote = "(waiting: " + e.WaitingFor + ")" // held while its route is paused, or for a slot
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.Route, e.Model, st, now.Sub(e.CreatedAt).Round(time.Second), e.Polls, remote)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	total := strconv.Itoa(page.Total)
	if page.TotalCapped {
		total = "more than " + total
	}
	fmt.Fprintf(g.Stderr, "%d of %s jobs", len(page.Jobs), total)
	if page.Next != "" {
		fmt.Fprintf(g.Stderr, "; the next page: --cursor %s", page.Next)
	}
	fmt.Fprintln(g.Stderr)
	return nil
}

// when reads a point in time: an RFC 3339 time, or a duration before now.
func when(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, errors.New("a duration ago (30m, 2h) or an RFC 3339 time (2026-11-29T15:04:05Z), not " + strconv.Quote(v))
	}
	return now.Add(-d), nil
}
