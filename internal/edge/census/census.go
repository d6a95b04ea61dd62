// Package census samples the state of the whole fleet from JetStream alone,
// cheaply enough to do every few seconds at any scale: per route, how many
// jobs are tracked and how old the oldest is, the backlog of checks and of
// intake, the budget leases out, and any pause; and the stored webhook and
// event counts. It reads consumer infos, one message per route by direct
// get, and the routes bucket — never the job records. The poller exports it
// as Prometheus gauges; `pollux stats` and `pollux watch` print it.
package census

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Route is one route's sample.
type Route struct {
	Route string `json:"route"`
	// Tracked counts the jobs being tracked: each has one check message,
	// in the poller's consumer or parked.
	Tracked int `json:"tracked"`
	// Parked counts those whose check is parked: their next poll is
	// park_after or more away (see events.Namespace.Parked). Exact below
	// ~64k; above, estimated from one slot (countParked).
	Parked int `json:"parked"`
	// Backlog counts checks never delivered yet: new jobs no poller has
	// picked up.
	Backlog int `json:"backlog"`
	// Oldest is how long the route's oldest unresolved job has been at
	// its provider: the time since its first event (its submit) of the
	// first job, in the order jobs were submitted, whose record is not
	// terminal; 0 when none is. A job waiting for admission has no event
	// yet and shows in the admission queue instead. While a census walk
	// has not caught up with a long history, the age of the event it
	// reached: more than the true age, never less.
	Oldest state.Duration `json:"oldest_s"`
	// Intake counts intake messages not yet handled.
	Intake int `json:"intake"`
	// Leases are the budget leases out, and their cap, by kind.
	Leases map[string]Leases `json:"leases,omitempty"`
	// Pause is the route's pause, when one is in force.
	Pause *route.Pause `json:"pause,omitempty"`
	// Operator is an operator's pause of the route, when one is in force
	// (route.PauseRoute).
	Operator *route.Pause `json:"operator_pause,omitempty"`
}

// Want is a budget level to sample: its scope (events.Scope), and whether
// it caps running jobs (it has a running-slot stream then).
type Want struct {
	Scope   string
	Running bool
}

// Leases are a budget's leases out (in calls or resting) and its cap.
type Leases struct {
	Out int `json:"out"`
	Cap int `json:"cap"`
}

// Level is one shared budget level's sample (an account, the global
// level): its leases by kind, and its running slots.
type Level struct {
	// Level names it: "account x", "global", "route y" (a route's own
	// leases are in its Route sample; its running slots are here).
	Level  string            `json:"level"`
	Leases map[string]Leases `json:"leases,omitempty"`
	// Running are the running slots taken (Out) and the cap in force
	// (learned, for a level that learns it); Configured is the cap the
	// configuration gives (budget.Uncapped when it gives none).
	Running    *Leases `json:"running,omitempty"`
	Configured int     `json:"running_configured,omitempty"`
}

// Rate is a call rate a level learned (budget.LearnedRate) and is in
// force.
type Rate struct {
	// Level names the level ("global", "account x", "route y"), Kind the
	// calls (events.SlotSubmit, SlotStatus).
	Level string `json:"level"`
	Kind  string `json:"kind"`
	// Rate is the calls a second in force, Configured the configured rate
	// (0: none), Lowered how often the provider's refusals lowered it.
	Rate       float64 `json:"rate"`
	Configured float64 `json:"configured,omitempty"`
	Lowered    int     `json:"lowered"`
}

// Snapshot is the fleet at one moment.
type Snapshot struct {
	At     time.Time `json:"at"`
	Routes []Route   `json:"routes"`
	// Levels are the budget levels with shared leases or running slots.
	Levels []Level `json:"levels,omitempty"`
	// Rates are the learned call rates in force.
	Rates []Rate `json:"learned_rates,omitempty"`
	// Webhooks counts stored deliveries not yet applied.
	Webhooks uint64 `json:"webhooks_backlog"`
	// Events and EventBytes are what the events stream holds.
	Events     uint64 `json:"events_stored"`
	EventBytes uint64 `json:"events_bytes"`
}

// Take samples the fleet. With routes nil it finds the routes from the
// pollers' consumers, and the budget levels from the budget consumers and
// running-slot streams; with routes given, want names the budget levels
// to sample, so that a process allowed only its own consumers and streams
// lists none.
func Take(ctx context.Context, ns events.Namespace, res *events.Resources, routes []string, want ...Want) (*Snapshot, error) {
	now := time.Now()
	discover := routes == nil
	if discover {
		var err error
		if routes, err = Routes(ctx, ns, res); err != nil {
			return nil, err
		}
	}
	s := &Snapshot{At: now.UTC()}
	get := jobs.New(ns, res.JS, res, jobs.Config{}).Get
	for _, name := range routes {
		r, err := takeRoute(ctx, ns, res, get, name, now)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", name, err)
		}
		s.Routes = append(s.Routes, r)
	}
	levels, err := takeLevels(ctx, ns, res, discover, want)
	if err != nil {
		return nil, err
	}
	s.Levels = levels
	if s.Rates, err = takeRates(ctx, res.Limits); err != nil {
		return nil, err
	}
	for _, st := range []struct {
		s    jetstream.Stream
		msgs *uint64
		b    *uint64
	}{{res.Webhooks, &s.Webhooks, nil}, {res.Events, &s.Events, &s.EventBytes}} {
		info, err := st.s.Info(ctx)
		if err != nil {
			return nil, err
		}
		*st.msgs = info.State.Msgs
		if st.b != nil {
			*st.b = info.State.Bytes
		}
	}
	return s, nil
}

// Routes lists the routes some poller has served, from the consumer names.
func Routes(ctx context.Context, ns events.Namespace, res *events.Resources) ([]string, error) {
	pollers, err := pollerConsumers(ctx, ns, res)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(pollers)), nil
}

// pollerConsumers lists the poller consumers (one per partition) of each
// route.
func pollerConsumers(ctx context.Context, ns events.Namespace, res *events.Resources) (map[string][]string, error) {
	out := map[string][]string{}
	names := res.Checks.ConsumerNames(ctx)
	for name := range names.Name() {
		if r, _, _, ok := ns.ParsePollerConsumer(name); ok {
			out[r] = append(out[r], name)
		}
	}
	return out, names.Err()
}

func takeRoute(ctx context.Context, ns events.Namespace, res *events.Resources, get func(context.Context, string) (*state.Job, error), name string, now time.Time) (Route, error) {
	r := Route{Route: name, Leases: map[string]Leases{}}
	pollers, err := pollerConsumers(ctx, ns, res)
	if err != nil {
		return r, err
	}
	for _, c := range pollers[name] {
		ci, err := consumerInfo(ctx, res.Checks, c)
		if err != nil {
			return r, err
		}
		if ci != nil {
			r.Tracked += int(ci.NumPending) + ci.NumAckPending
			r.Backlog += int(ci.NumPending)
		}
	}
	parked, err := countParked(ctx, ns, res, name)
	if err != nil {
		return r, err
	}
	r.Parked = parked
	r.Tracked += parked
	oldest, err := oldestUnresolved(ctx, ns, res, get, name, now)
	if err != nil {
		return r, fmt.Errorf("oldest unresolved job: %w", err)
	}
	r.Oldest = state.Duration(oldest)
	if ci, err := consumerInfo(ctx, res.Intake, ns.IngestConsumer(name)); err != nil {
		return r, err
	} else if ci != nil {
		r.Intake = int(ci.NumPending) + ci.NumAckPending
	}
	for _, kind := range []string{events.SlotSubmit, events.SlotStatus} {
		ci, err := consumerInfo(ctx, res.Slots, ns.BudgetConsumer(name, kind))
		if err != nil {
			return r, err
		}
		if ci != nil {
			r.Leases[kind] = Leases{Out: ci.NumAckPending, Cap: ci.Config.MaxAckPending}
		}
	}
	for _, k := range []struct {
		key string
		to  **route.Pause
	}{{name, &r.Pause}, {route.OperatorKey(name), &r.Operator}} {
		e, err := res.Routes.Get(ctx, k.key)
		switch {
		case err == nil:
			var p route.Pause
			if json.Unmarshal(e.Value(), &p) == nil && (now.Before(p.Until) || p.Kind == route.PauseOperator && p.Until.IsZero()) {
				*k.to = &p
			}
		case !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted):
			return r, err
		}
	}
	return r, nil
}

// takeLevels samples the budget levels of scopes (discover: and of every
// level found in the slots stream's consumers and the running-slot
// streams): an account's and the global level's leases (a route's are in
// its own sample), and every level's running slots.
func takeLevels(ctx context.Context, ns events.Namespace, res *events.Resources, discover bool, want []Want) ([]Level, error) {
	running := map[string]bool{}
	var scopes []string
	add := func(scope string, capped bool) {
		if !slices.Contains(scopes, scope) {
			scopes = append(scopes, scope)
		}
		running[scope] = running[scope] || capped
	}
	for _, w := range want {
		add(w.Scope, w.Running)
	}
	if discover {
		names := res.Slots.ConsumerNames(ctx)
		for name := range names.Name() {
			if scope, _, ok := parseBudgetConsumer(name); ok && strings.Contains(scope, "~") {
				add(scope, false)
			}
		}
		if err := names.Err(); err != nil {
			return nil, err
		}
		if res.JS != nil {
			streams := res.JS.StreamNames(ctx, jetstream.WithStreamListSubject(ns.Running("*", "*")))
			for name := range streams.Name() {
				if scope, ok := scopeOf(ns, name); ok {
					add(scope, true)
				}
			}
			if err := streams.Err(); err != nil {
				return nil, err
			}
		}
	}
	out := make([]Level, 0, len(scopes))
	slices.Sort(scopes)
	for _, scope := range scopes {
		lvl, name := events.ParseScope(scope)
		l := Level{Level: strings.TrimSpace(lvl + " " + name), Leases: map[string]Leases{}}
		if lvl != events.LevelRoute {
			for _, kind := range []string{events.SlotSubmit, events.SlotStatus} {
				ci, err := consumerInfo(ctx, res.Slots, ns.BudgetConsumer(scope, kind))
				if err != nil {
					return nil, err
				}
				if ci != nil {
					l.Leases[kind] = Leases{Out: ci.NumAckPending, Cap: ci.Config.MaxAckPending}
				}
			}
		}
		if res.JS != nil && running[scope] {
			st, err := res.JS.Stream(ctx, ns.RunningStream(lvl, name))
			switch {
			case err == nil:
				info := st.CachedInfo()
				l.Running = &Leases{Out: int(info.State.Msgs), Cap: int(info.Config.MaxMsgs)}
				l.Configured, _ = strconv.Atoi(info.Config.Metadata["pollux_running_configured"])
			case !errors.Is(err, jetstream.ErrStreamNotFound):
				return nil, err
			}
		}
		if len(l.Leases) > 0 || l.Running != nil {
			out = append(out, l)
		}
	}
	return out, nil
}

// takeRates reads the learned call rates from the limits bucket (nil: none).
func takeRates(ctx context.Context, kv jetstream.KeyValue) ([]Rate, error) {
	if kv == nil {
		return nil, nil
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("learned rates: %w", err)
	}
	var out []Rate
	for key := range keys.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // back at the configured rate meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("learned rate %s: %w", key, err)
		}
		var lr budget.LearnedRate
		i := strings.LastIndexByte(key, '.')
		if i < 0 || json.Unmarshal(e.Value(), &lr) != nil || lr.Rate <= 0 {
			continue // not a rate Pollux wrote
		}
		out = append(out, Rate{Level: strings.Replace(key[:i], ".", " ", 1), Kind: key[i+1:], Rate: lr.Rate, Configured: lr.Configured, Lowered: lr.Lowered})
	}
	slices.SortFunc(out, func(a, b Rate) int { return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(a.Kind, b.Kind)) })
	return out, nil
}

// scopeOf returns the scope of a running-slot stream's name.
func scopeOf(ns events.Namespace, name string) (string, bool) {
	if name == ns.RunningStream(events.LevelGlobal, "") {
		return events.Scope(events.LevelGlobal, ""), true
	}
	// Longest prefixes first: RUNNING_APP_ before RUNNING_A_ cannot
	// clash (the byte after A differs), but the order keeps it obvious.
	for _, lvl := range []string{events.LevelApp, events.LevelAppWaiting, events.LevelAccount, events.LevelRoute} {
		if rest, ok := strings.CutPrefix(name, ns.RunningStream(lvl, "")); ok && rest != "" {
			return events.Scope(lvl, rest), true
		}
	}
	return "", false
}

// parseBudgetConsumer reads "budget-<scope>-<kind>" (Namespace.BudgetConsumer).
func parseBudgetConsumer(name string) (scope, kind string, ok bool) {
	rest, ok := strings.CutPrefix(name, "budget-")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// parkedSampleFrom is the count of parked checks in a route's first slot
// from which countParked estimates the route's count from that slot alone.
const parkedSampleFrom = 1024

// countParked counts route's parked checks. The server counts a filter's
// messages by walking its subject index, holding the stream meanwhile:
// 242 ms at 500,000 parked checks (BenchmarkCountParked), a stall of
// every poll at every census; 1.8 ms for one slot. So it counts one slot first (1/events.CheckSlots of the
// walk) and, when that holds parkedSampleFrom or more, reports it times
// the slots — the slots are a hash of the job id, so within a few
// percent — else counts every slot, a walk of fewer than ~64k subjects.
func countParked(ctx context.Context, ns events.Namespace, res *events.Resources, route string) (int, error) {
	first, err := countParkedOn(ctx, ns, res, ns.ParkedInSlot(route, 0))
	switch {
	case err != nil:
		return 0, err
	case first >= parkedSampleFrom:
		return first * events.CheckSlots, nil
	}
	return countParkedOn(ctx, ns, res, ns.ParkedChecks(route))
}

// countParkedOn counts the checks stream's messages on filter with one
// direct get: a batch get of the first message on it says how many
// follow it (Nats-Num-Pending), which the server counts from its subject
// index without reading a message.
func countParkedOn(ctx context.Context, ns events.Namespace, res *events.Resources, filter string) (int, error) {
	req, err := json.Marshal(map[string]any{"seq": 0, "next_by_subj": filter, "batch": 1})
	if err != nil {
		return 0, err
	}
	m, err := res.JS.Conn().RequestWithContext(ctx, "$JS.API.DIRECT.GET."+ns.ChecksStream(), req)
	if err != nil {
		return 0, fmt.Errorf("count parked checks: %w", err)
	}
	switch m.Header.Get("Status") {
	case "404":
		return 0, nil
	case "":
	default:
		return 0, fmt.Errorf("count parked checks: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
	}
	n, err := strconv.Atoi(m.Header.Get("Nats-Num-Pending"))
	if err != nil {
		return 0, fmt.Errorf("count parked checks: no count in the answer")
	}
	return n + 1, nil
}

// consumerInfo returns a consumer's info, nil when it does not exist.
func consumerInfo(ctx context.Context, s jetstream.Stream, name string) (*jetstream.ConsumerInfo, error) {
	c, err := s.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// Paused reports whether r's provider calls are held back: by an
// operator's pause or the provider's (a rate limit, failed
// authentication).
func (r Route) Paused() bool { return r.Operator != nil || r.Pause != nil }

// StateText says whether r's calls run, and if not, until when and why, as
// `pollux routes` prints it and GET /v1/routes answers it:
// "running", "paused by alice until 2026-12-02 15:04:05: deploy",
// "paused (rate_limit) for 12s", or both pauses joined by "; ".
func (r Route) StateText(now time.Time) string {
	var parts []string
	if op := r.Operator; op != nil {
		s := "paused by " + op.By
		if !op.Until.IsZero() {
			s += " until " + op.Until.Local().Format(time.DateTime)
		}
		if op.Reason != "" {
			s += ": " + op.Reason
		}
		parts = append(parts, s)
	}
	if p := r.Pause; p != nil {
		parts = append(parts, fmt.Sprintf("paused (%s) for %s", p.Kind, p.Until.Sub(now).Round(time.Second)))
	}
	if len(parts) == 0 {
		return "running"
	}
	return strings.Join(parts, "; ")
}
