package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/pkg/events"
)

// RoutesCmd is `pollux routes`: list the routes, pause and resume one.
type RoutesCmd struct {
	List   RoutesListCmd   `cmd:"" default:"withargs" help:"List the routes a poller serves: state, tracked jobs, backlog, oldest unresolved job."`
	Pause  RoutesPauseCmd  `cmd:"" help:"Stop a route's provider calls across the fleet (an operator's pause, recorded as the route's event)."`
	Resume RoutesResumeCmd `cmd:"" help:"End an operator's pause of a route."`
}

// RoutesListCmd is `pollux routes [list]`.
type RoutesListCmd struct {
	Connection `embed:""`
	JSON       bool `name:"json" help:"Print the routes as JSON."`
}

// Run prints every route's state.
func (c *RoutesListCmd) Run(g *Globals) error {
	return c.fleet(time.Minute, func(ctx context.Context, _ jetstream.JetStream, ns events.Namespace, res *events.Resources) error {
		s, err := census.Take(ctx, ns, res, nil)
		if err != nil {
			return err
		}
		if c.JSON {
			return json.NewEncoder(g.Stdout).Encode(s.Routes)
		}
		w := tabwriter.NewWriter(g.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ROUTE\tSTATE\tTRACKED\tPARKED\tBACKLOG\tOLDEST")
		for _, r := range s.Routes {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\n", r.Route, r.StateText(s.At), r.Tracked, r.Parked, r.Backlog, time.Duration(r.Oldest).Round(time.Second))
		}
		return w.Flush()
	})
}

// RoutesPauseCmd is `pollux routes pause`.
type RoutesPauseCmd struct {
	Connection `embed:""`
	Route      string        `arg:"" help:"Route to pause."`
	For        time.Duration `name:"for" help:"How long (default: until resumed)."`
	Reason     string        `name:"reason" help:"Why, shown with the pause and in its event."`
	By         string        `name:"by" env:"POLLUX_OPERATOR" help:"Who pauses (default: $USER, else the account running pollux)."`
}

// Run writes the pause and records it as the route's event.
func (c *RoutesPauseCmd) Run(g *Globals) error {
	by := operator(c.By)
	if c.For < 0 {
		return fmt.Errorf("--for: must not be negative (got %s)", c.For)
	}
	var until time.Time
	if c.For > 0 {
		until = time.Now().Add(c.For)
	}
	return c.fleet(time.Minute, func(ctx context.Context, js jetstream.JetStream, ns events.Namespace, res *events.Resources) error {
		if err := served(ctx, ns, res, c.Route); err != nil {
			return err
		}
		ps, err := route.PauseAndRecord(ctx, route.NewPauses(res.Routes, zerolog.Nop()), js, ns, c.Route, until, by, c.Reason)
		if err != nil {
			return err
		}
		end := "until resumed (pollux routes resume " + c.Route + ")"
		if !ps.Until.IsZero() {
			end = "until " + ps.Until.Local().Format(time.DateTime)
		}
		fmt.Fprintf(g.Stdout, "route %s paused by %s %s; calls held back look again within %s of a resume\n", c.Route, by, end, route.OperatorRecheck)
		return nil
	})
}

// RoutesResumeCmd is `pollux routes resume`.
type RoutesResumeCmd struct {
	Connection `embed:""`
	Route      string `arg:"" help:"Route to resume."`
	Reason     string `name:"reason" help:"Why, recorded in the event."`
	By         string `name:"by" env:"POLLUX_OPERATOR" help:"Who resumes (default: $USER, else the account running pollux)."`
}

// Run ends the pause and records it as the route's event.
func (c *RoutesResumeCmd) Run(g *Globals) error {
	by := operator(c.By)
	return c.fleet(time.Minute, func(ctx context.Context, js jetstream.JetStream, ns events.Namespace, res *events.Resources) error {
		if err := served(ctx, ns, res, c.Route); err != nil {
			return err
		}
		was, inForce, err := route.ResumeAndRecord(ctx, route.NewPauses(res.Routes, zerolog.Nop()), js, ns, c.Route, by, c.Reason)
		if err != nil {
			return err
		}
		if !inForce {
			return fmt.Errorf("route %s has no operator's pause in force", c.Route)
		}
		fmt.Fprintf(g.Stdout, "route %s resumed by %s (paused by %s since %s)\n", c.Route, by, was.By, was.Since.Local().Format(time.DateTime))
		return nil
	})
}

// operator is who acts: the flag (or POLLUX_OPERATOR), else the login
// name ($USER, else the account the process runs as, as a shell without
// $USER — cron, a container's exec — still has one).
func operator(by string) string {
	if by != "" {
		return by
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

// served refuses a route no poller serves: a typo would pause nothing.
func served(ctx context.Context, ns events.Namespace, res *events.Resources, name string) error {
	routes, err := census.Routes(ctx, ns, res)
	if err != nil {
		return err
	}
	if !slices.Contains(routes, name) {
		return fmt.Errorf("no poller serves route %q (routes: %s)", name, strings.Join(routes, ", "))
	}
	return nil
}

// fleet runs fn with the deployment's streams and buckets, for at most
// timeout.
func (c Connection) fleet(timeout time.Duration, fn func(context.Context, jetstream.JetStream, events.Namespace, *events.Resources) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	nc, js, ns, err := c.open()
	if err != nil {
		return err
	}
	defer nc.Close()
	res, err := ns.Open(ctx, js)
	if err != nil {
		return err
	}
	return fn(ctx, js, ns, res)
}
