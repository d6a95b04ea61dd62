package route

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// ModelRoute serves one model through several provider routes: each
// submission to it goes to the member Choose ranks first (see
// config.ModelRoute).
type ModelRoute struct {
	Name    string
	Members []Member
	// Hedge, HedgeBelow and Explore are the configuration's, defaults
	// filled in.
	Hedge      bool
	HedgeBelow float64
	Explore    float64
}

// Member is one provider route of a model route, and the model's id on it.
type Member struct {
	Route *Route
	Model string
}

// Defaults of a model route.
const (
	DefaultHedgeBelow = 0.5
	DefaultExplore    = 0.05
)

// BuildModels builds the configuration's model routes over its built
// routes.
func BuildModels(c *config.Config, routes map[string]*Route) (map[string]*ModelRoute, error) {
	out := make(map[string]*ModelRoute, len(c.ModelRoutes))
	for name, mc := range c.ModelRoutes {
		mr := &ModelRoute{Name: name, Hedge: mc.Hedge, HedgeBelow: cmp.Or(mc.HedgeBelow, DefaultHedgeBelow), Explore: cmp.Or(mc.Explore, DefaultExplore)}
		if mr.Explore < 0 {
			mr.Explore = 0
		}
		for _, m := range mc.Members {
			r := routes[m.Route]
			if r == nil {
				return nil, fmt.Errorf("model route %s: no route named %q", name, m.Route)
			}
			mr.Members = append(mr.Members, Member{Route: r, Model: m.Model})
		}
		out[name] = mr
	}
	return out, nil
}

// Member returns the member on the named route.
func (mr *ModelRoute) Member(route string) (Member, bool) {
	i := slices.IndexFunc(mr.Members, func(m Member) bool { return m.Route.Name == route })
	if i < 0 {
		return Member{}, false
	}
	return mr.Members[i], true
}

// MemberState is what the caller knows of a member at a choice beyond what
// was learned: whether the route is paused, and whether jobs wait for its
// running slots.
type MemberState struct {
	Paused, Waiting bool
}

// Choice is a model route's ranking of its members for one job.
type Choice struct {
	// Ranked are the members best first: Ranked[0] is the choice (after
	// exploration), the rest are where a hedge or a failover goes.
	Ranked []Member
	// Routing is the choice as the job's record keeps it.
	Routing state.Routing
}

// Penalties of the score (seconds) for a member that cannot start the job
// now.
const (
	waitingPenalty = 2 // × the estimate: jobs wait for its running slots
	failureCap     = 0.95
)

// Choose ranks the model route's members for a job of configuration
// configKey and length submitted at now with the given deadline (zero for
// none) and expected duration (0 unknown), by what learned says of each
// and what state says of each now, and returns the ranking.
//
// Each member's score estimates the seconds to a successful end: its
// learned 90th percentile of completion time (for a member learned too
// little of, the best learned one's, or the submission's expected
// duration, so that an unknown member is tried rather than shunned),
// divided by its chance of success (1 − its recent failure rate, capped
// at 95% failures), doubled when jobs wait for its running slots. A
// member that will likely miss the deadline (by its learned distribution,
// a chance under 1/2 to end by it) ranks after those that will not; a
// paused one ranks last. Ties keep the configured order.
//
// With probability Explore — decided by the job's id, so a redelivery
// decides alike — the second-ranked member that is not paused goes first:
// what is learned of every member stays current.
func (mr *ModelRoute) Choose(id, configKey string, length float64, now, deadline time.Time, expected time.Duration, learned Learned, states []MemberState) Choice {
	type cand struct {
		m     Member
		c     state.Candidate
		p90   float64 // 0: not learned
		late  bool
		order int
	}
	cs := make([]cand, len(mr.Members))
	best := 0.0
	for i, m := range mr.Members {
		c := cand{m: m, order: i, c: state.Candidate{Route: m.Route.Name, Model: m.Model}}
		if i < len(states) {
			c.c.Paused, c.c.Waiting = states[i].Paused, states[i].Waiting
		}
		if learned != nil {
			c.c.FailureRate, _ = learned.Failures(m.Route.Name, m.Model)
			if total, _ := learned.Lookup(m.Route.Name, m.Model, configKey, length); total != nil && total.Weight() >= schedule.DefaultMinSamples {
				p90 := total.Quantile(0.9)
				c.p90, c.c.P90 = p90.Seconds(), state.Duration(p90)
				if !deadline.IsZero() {
					on := 1 - total.Survival(deadline.Sub(now))
					c.c.OnTime = &on
					c.late = on < 0.5
				}
				if best == 0 || c.p90 < best {
					best = c.p90
				}
			}
		}
		cs[i] = c
	}
	for i := range cs {
		c := &cs[i]
		est := c.p90
		if est == 0 {
			est = cmp.Or(best, expected.Seconds(), 60)
		}
		score := est / (1 - min(c.c.FailureRate, failureCap))
		if c.c.Waiting {
			score *= waitingPenalty
		}
		c.c.Score = score
	}
	rank := func(c *cand) int {
		switch {
		case c.c.Paused:
			return 2
		case c.late:
			return 1
		}
		return 0
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		return cmp.Or(cmp.Compare(rank(&a), rank(&b)), cmp.Compare(a.c.Score, b.c.Score), cmp.Compare(a.order, b.order))
	})
	explored := false
	if mr.Explore > 0 && len(cs) > 1 && !cs[1].c.Paused && unit(id) < mr.Explore {
		cs[0], cs[1] = cs[1], cs[0]
		explored = true
	}
	ch := Choice{Routing: state.Routing{Via: mr.Name, Hedge: mr.Hedge}}
	for _, c := range cs {
		ch.Ranked = append(ch.Ranked, c.m)
		ch.Routing.Candidates = append(ch.Routing.Candidates, c.c)
	}
	ch.Routing.Why = why(cs[0].c, ch.Routing.Candidates, explored)
	return ch
}

// why says a choice in a sentence.
func why(chosen state.Candidate, all []state.Candidate, explored bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", chosen.Route)
	switch {
	case explored:
		b.WriteString("explored (a share of jobs keeps what is learned of every member current); ")
	case chosen.Paused:
		b.WriteString("every member is paused; ")
	}
	var parts []string
	for _, c := range all {
		p := fmt.Sprintf("%s ~%.3gs", c.Route, c.Score)
		var notes []string
		if c.P90 > 0 {
			notes = append(notes, fmt.Sprintf("p90 %.3gs", time.Duration(c.P90).Seconds()))
		} else {
			notes = append(notes, "not learned yet")
		}
		if c.FailureRate > 0 {
			notes = append(notes, fmt.Sprintf("%.0f%% failed", 100*c.FailureRate))
		}
		if c.OnTime != nil {
			notes = append(notes, fmt.Sprintf("%.0f%% on time", 100**c.OnTime))
		}
		if c.Paused {
			notes = append(notes, "paused")
		}
		if c.Waiting {
			notes = append(notes, "slots full")
		}
		parts = append(parts, p+" ("+strings.Join(notes, ", ")+")")
	}
	b.WriteString("expected time to a success ")
	b.WriteString(strings.Join(parts, " < "))
	return b.String()
}

// unit maps a job id to [0, 1), the same for every process.
func unit(id string) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	x := h.Sum64() // FNV's high bits follow the last bytes closely: mix them (splitmix64's finalizer)
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}
