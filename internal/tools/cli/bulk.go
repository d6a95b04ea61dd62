package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
)

// BulkFilter selects jobs for a bulk action as `pollux jobs` does.
type BulkFilter struct {
	State  []string `name:"state" sep:"," help:"Act on the jobs in these states (comma-separated: failed,lost)."`
	Route  string   `name:"route" help:"Act on this route's jobs."`
	Model  string   `name:"model" help:"Act on this model's jobs."`
	Since  string   `name:"since" help:"Act on jobs created after this: a duration ago (1h) or an RFC 3339 time."`
	Before string   `name:"before" help:"Act on jobs created before this: a duration ago (10m) or an RFC 3339 time."`
}

// filter returns the front door's filter ("" values left out; nil when
// no flag is given).
func (f BulkFilter) filter(now time.Time) (map[string]string, error) {
	m := map[string]string{}
	for k, v := range map[string]string{"state": strings.Join(f.State, ","), "route": f.Route, "model": f.Model} {
		if v != "" {
			m[k] = v
		}
	}
	for _, t := range []struct{ flag, value, param string }{{"since", f.Since, "created_after"}, {"before", f.Before, "created_before"}} {
		if t.value == "" {
			continue
		}
		at, err := when(t.value, now)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", t.flag, err)
		}
		m[t.param] = at.UTC().Format(time.RFC3339Nano)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// Bulk is what the bulk commands share: the front door, a reason, and
// the confirmation.
type Bulk struct {
	FrontDoor `embed:""`
	Filter    BulkFilter `embed:""`
	Reason    string     `name:"reason" help:"Why, kept in each job's record."`
	Yes       bool       `name:"yes" short:"y" help:"Do not ask: act on the jobs matched (required without a terminal)."`
}

// run does a bulk action ("cancel", "resubmit") on ids or the filter: a
// dry run, the count and some ids printed, a confirmation (asked on the
// terminal, or --yes), then the action confirmed with that count.
func (b Bulk) run(g *Globals, action string, ids []string) error {
	filter, err := b.Filter.filter(time.Now())
	if err != nil {
		return err
	}
	switch {
	case len(ids) > 0 && filter != nil:
		return errors.New("name jobs or give a filter (--state, --route, --model, --since, --before), not both")
	case len(ids) == 0 && filter == nil:
		return errors.New("name the jobs, or give a filter (--state, --route, --model, --since, --before)")
	}
	ctx, stop := signalContext()
	defer stop()
	req := frontdoor.BulkRequest{Reason: b.Reason, Filter: filter}
	if len(ids) > 0 {
		req.IDs = ids
	}
	var dry frontdoor.BulkResult
	if err := b.post(ctx, "/v1/jobs/"+action, req, &dry); err != nil {
		return err
	}
	fmt.Fprintf(g.Stdout, "%d jobs match: %s", dry.Matched, strings.Join(dry.Sample, " "))
	if dry.Matched > len(dry.Sample) {
		fmt.Fprintf(g.Stdout, " … and %d more", dry.Matched-len(dry.Sample))
	}
	fmt.Fprintln(g.Stdout)
	if dry.Matched == 0 {
		return nil
	}
	if !b.Yes {
		if err := confirm(g, fmt.Sprintf("%s %d jobs?", action, dry.Matched)); err != nil {
			return err
		}
	}
	req.Confirm = &dry.Matched
	fmt.Fprintf(g.Stderr, "%s: %d jobs…\n", action, dry.Matched)
	var res frontdoor.BulkResult
	if err := b.post(ctx, "/v1/jobs/"+action, req, &res); err != nil {
		return err
	}
	for _, it := range res.Results {
		switch {
		case it.Outcome != "accepted":
			fmt.Fprintf(g.Stdout, "%s\tskipped: %s\n", it.ID, it.Why)
		case it.NewID != "":
			fmt.Fprintf(g.Stdout, "%s\tresubmitted as %s\n", it.ID, it.NewID)
		default:
			fmt.Fprintf(g.Stdout, "%s\t%s requested\n", it.ID, action)
		}
	}
	fmt.Fprintf(g.Stdout, "%d accepted, %d skipped\n", res.Accepted, res.Skipped)
	return nil
}

// confirm asks question on the terminal and returns nil on "y" or "yes";
// without a terminal it refuses (--yes is the way to act unasked).
func confirm(g *Globals, question string) error {
	in, ok := g.Stdin.(io.ReadWriter)
	if !ok || !isTerminal(in) {
		return errors.New("not confirmed: no terminal to ask on; pass --yes to act without asking")
	}
	fmt.Fprintf(g.Stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errors.New("not confirmed; nothing done")
}

// ResubmitCmd is `pollux resubmit`: failed, lost or expired jobs submitted
// again as new jobs linked to them, through the front door.
type ResubmitCmd struct {
	Bulk `embed:""`
	IDs  []string `arg:"" optional:"" help:"Job ids (or a filter)."`
}

// Run resubmits the jobs named or matched, once confirmed.
func (c *ResubmitCmd) Run(g *Globals) error {
	return c.run(g, "resubmit", c.IDs)
}
