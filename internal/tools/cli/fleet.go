package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/internal/edge/report"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// StatsCmd is `pollux stats`.
type StatsCmd struct {
	Connection `embed:""`
	JSON       bool `name:"json" env:"POLLUX_STATS_JSON" help:"Print one JSON object."`
}

// Run prints the fleet's figures.
func (c *StatsCmd) Run(g *Globals) error {
	return c.fleet(2*time.Minute, func(ctx context.Context, js jetstream.JetStream, ns events.Namespace, res *events.Resources) error {
		r, err := report.Build(ctx, jobs.New(ns, js, res, jobs.Config{}), res)
		if err != nil {
			return err
		}
		sp, err := spend.New(spend.Config{}, res.Spend).Report(ctx, false, "", spendDays, time.Now())
		if err != nil {
			return err
		}
		if c.JSON {
			return json.NewEncoder(g.Stdout).Encode(struct {
				*report.Report
				Spend []spend.AppSpend `json:"spend"`
			}{r, sp})
		}
		r.Print(g.Stdout)
		printSpend(g.Stdout, sp)
		return nil
	})
}

// WatchCmd is `pollux watch`.
type WatchCmd struct {
	Connection `embed:""`
	Every      time.Duration `name:"every" env:"POLLUX_WATCH_EVERY" default:"1s" help:"Refresh interval."`
}

// Run shows the fleet live until Ctrl-C: redrawn in place on a terminal,
// one report after another in plain text otherwise.
func (c *WatchCmd) Run(g *Globals) error {
	if err := positive("every", c.Every); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	nc, js, ns, err := c.open()
	if err != nil {
		return err
	}
	defer nc.Close()
	return c.watch(ctx, js, ns, g, isTerminal(g.Stdout))
}

// watch prints the fleet's report every c.Every until ctx ends; in place
// (clearing the screen) when inPlace, else as plain text, a blank line
// between reports.
func (c *WatchCmd) watch(ctx context.Context, js jetstream.JetStream, ns events.Namespace, g *Globals, inPlace bool) error {
	res, err := ns.Open(ctx, js)
	if err != nil {
		return err
	}

	// Follow events from now, then count what exists: an event in between
	// is applied after the scan and only moves a job forward.
	evs := make(chan *events.Event, 1024)
	oc, err := js.OrderedConsumer(ctx, ns.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{ns.Events()}, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return err
	}
	cc, err := oc.Consume(func(msg jetstream.Msg) {
		if ev, err := events.DecodeEvent(msg.Data()); err == nil {
			select {
			case evs <- ev:
			case <-ctx.Done():
			}
		}
	})
	if err != nil {
		return err
	}
	defer cc.Stop()
	live := report.NewLive()
	if err := jobs.New(ns, js, res, jobs.Config{}).Each(ctx, func(j *state.Job, err error) error {
		if err == nil {
			live.Seed(j)
		}
		return nil
	}); err != nil {
		return err
	}

	tick := time.NewTicker(c.Every)
	defer tick.Stop()
	var snap *census.Snapshot
	for first := true; ; first = false {
		if s, err := census.Take(ctx, ns, res, nil); err == nil {
			snap = s
		}
		var screen strings.Builder
		live.Report(snap).Print(&screen)
		switch {
		case inPlace:
			fmt.Fprintf(g.Stdout, "\033[H\033[2J%s\n(refreshing every %s; Ctrl-C to quit)\n", screen.String(), c.Every)
		case first:
			fmt.Fprint(g.Stdout, screen.String())
		default:
			fmt.Fprintf(g.Stdout, "\n%s", screen.String())
		}
		select {
		case <-ctx.Done():
			if inPlace {
				fmt.Fprintln(g.Stdout)
			}
			return nil
		case <-tick.C:
		}
	drain:
		for {
			select {
			case ev := <-evs:
				live.Apply(ev)
			default:
				break drain
			}
		}
	}
}
