package simulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Change is one setting of a route's poll policy changed, as
// --what-if 'max_delay=30s' names it: the settings of the config file's
// poll section that shape the schedule of a learned model.
type Change struct {
	// Setting is the config file's name of the setting.
	Setting string `json:"setting"`
	// From and To are its value in the policy of today and in the
	// changed one.
	From string `json:"from"`
	To   string `json:"to"`

	set func(*schedule.Policy)
	get func(schedule.Policy) string
}

// Apply makes the change to p.
func (c Change) Apply(p *schedule.Policy) { c.set(p) }

// ChangeSettings lists the settings a Change may name.
const ChangeSettings = "poll_cost, min_delay, max_delay, jitter"

// ParseChange reads "setting=value": poll_cost, min_delay or max_delay
// and a duration > 0 (30s, 1m30s), or jitter and a number in (0, 1). An
// error names the setting and what it takes.
func ParseChange(s string) (Change, error) {
	name, value, ok := strings.Cut(strings.TrimSpace(s), "=")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" {
		return Change{}, fmt.Errorf("%q: want setting=value, such as max_delay=30s (settings: %s)", s, ChangeSettings)
	}
	duration := func(field func(*schedule.Policy) *time.Duration) (Change, error) {
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return Change{}, fmt.Errorf("%s: %q is not a duration > 0, such as 30s", name, value)
		}
		return Change{
			Setting: name, To: seconds(d),
			set: func(p *schedule.Policy) { *field(p) = d },
			get: func(p schedule.Policy) string { return seconds(*field(&p)) },
		}, nil
	}
	switch name {
	case "poll_cost":
		return duration(func(p *schedule.Policy) *time.Duration { return &p.PollCost })
	case "min_delay":
		return duration(func(p *schedule.Policy) *time.Duration { return &p.MinDelay })
	case "max_delay":
		return duration(func(p *schedule.Policy) *time.Duration { return &p.MaxDelay })
	case "jitter":
		x, err := strconv.ParseFloat(value, 64)
		if err != nil || !(x > 0 && x < 1) {
			// 0 is the config file's "default" (0.2): no policy has none.
			return Change{}, fmt.Errorf("jitter: %q is not a number in (0, 1), such as 0.1", value)
		}
		return Change{
			Setting: name, To: strconv.FormatFloat(x, 'g', -1, 64),
			set: func(p *schedule.Policy) { p.Jitter = x },
			get: func(p schedule.Policy) string { return strconv.FormatFloat(p.Jitter, 'g', -1, 64) },
		}, nil
	}
	return Change{}, fmt.Errorf("%q: unknown setting %q; want one of %s", s, name, ChangeSettings)
}

// seconds writes a duration in seconds, "30s" or "1.5s".
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'g', -1, 64) + "s" }

// WhatIf is adaptive run twice on the same jobs: under a policy and under
// the policy with changes.
type WhatIf struct {
	// Changes are the settings changed, From filled in.
	Changes []Change `json:"changes"`
	// Base and Changed are the two policies, defaults filled in.
	Base    schedule.Policy `json:"-"`
	Changed schedule.Policy `json:"-"`
	// All compares every scored job; Models each model with jobs after
	// the warm-up, in order of their first job.
	All    Comparison   `json:"all"`
	Models []Comparison `json:"models"`
	// Unscored names the models with no job after the warm-up.
	Unscored []string `json:"unscored_models,omitempty"`
}

// Comparison is one set of jobs under both policies.
type Comparison struct {
	Model   string `json:"model"`
	Base    Score  `json:"base"`
	Changed Score  `json:"changed"`
	// PollsChangePct is the change of polls per job, in percent;
	// MeanDelayChangeS and P95DelayChangeS the changes of the detection
	// delays, in seconds.
	PollsChangePct   float64 `json:"polls_per_job_change_pct"`
	MeanDelayChangeS float64 `json:"mean_delay_change_s"`
	P95DelayChangeS  float64 `json:"p95_delay_change_s"`
}

// AllModels is the Model of WhatIf.All.
const AllModels = "all"

// RunWhatIf runs the adaptive strategy over the jobs (in submit order)
// with cfg.Policy, then with the changes made to it, and compares them.
// Both runs have the same seed. A setting changed twice, or a change
// that leaves min_delay above max_delay, is an error naming it.
func RunWhatIf(jobs []Job, changes []Change, cfg Config) (*WhatIf, error) {
	if len(jobs) == 0 {
		return nil, errors.New("what-if: no jobs")
	}
	if len(changes) == 0 {
		return nil, errors.New("what-if: no change")
	}
	cfg = cfg.withDefaults()
	w := &WhatIf{Base: cfg.Policy, Changed: cfg.Policy}
	for i, c := range changes {
		if c.set == nil {
			return nil, fmt.Errorf("what-if: change %d was not made by ParseChange", i)
		}
		if slices.ContainsFunc(changes[:i], func(o Change) bool { return o.Setting == c.Setting }) {
			return nil, fmt.Errorf("%s: changed twice", c.Setting)
		}
		c.From = c.get(w.Base)
		c.set(&w.Changed)
		w.Changes = append(w.Changes, c)
	}
	if w.Changed.MinDelay > w.Changed.MaxDelay {
		return nil, fmt.Errorf("min_delay %s would be above max_delay %s", seconds(w.Changed.MinDelay), seconds(w.Changed.MaxDelay))
	}
	changed := cfg
	changed.Policy = w.Changed
	base, err := adaptiveOn(jobs, cfg)
	if err != nil {
		return nil, err
	}
	after, err := adaptiveOn(jobs, changed)
	if err != nil {
		return nil, err
	}
	w.All = compare(base[0], after[0])
	for m := 1; m < len(base); m++ {
		if base[m].Jobs == 0 {
			w.Unscored = append(w.Unscored, base[m].Model)
			continue
		}
		w.Models = append(w.Models, compare(base[m], after[m]))
	}
	return w, nil
}

// adaptiveOn runs adaptive with cfg (defaults filled in) and returns its
// score on every scored job (Model AllModels), then on each model's.
func adaptiveOn(jobs []Job, cfg Config) ([]Score, error) {
	r, err := newRun(jobs, cfg)
	if err != nil {
		return nil, err
	}
	s := Strategy{Name: "adaptive", kind: adaptive}
	knobs := r.same(cfg.Policy.PollCost.Seconds())
	out := r.simulate(s, knobs)
	var scored []int
	for _, md := range r.models {
		scored = append(scored, md.scored...)
	}
	if len(scored) == 0 {
		return nil, fmt.Errorf("what-if: the warm-up of %d jobs a model leaves no job scored", cfg.Warmup)
	}
	all := Score{Strategy: s.Name, Model: AllModels, Knob: knobs[0]}
	all.figures(scored, out, nil)
	return append([]Score{all}, r.score(s, knobs, out)...), nil
}

func compare(base, changed Score) Comparison {
	c := Comparison{Model: base.Model, Base: base, Changed: changed,
		MeanDelayChangeS: changed.MeanDelayS - base.MeanDelayS, P95DelayChangeS: changed.P95DelayS - base.P95DelayS}
	if base.PollsPerJob > 0 {
		c.PollsChangePct = 100 * (changed.PollsPerJob/base.PollsPerJob - 1)
	}
	return c
}

// WriteJSON writes the comparison as one JSON object.
func (w *WhatIf) WriteJSON(out io.Writer) error { return json.NewEncoder(out).Encode(w) }

// Write prints the comparison: a line for every scored job, such as
//
//	max_delay 60s → 30s: polls/job 4.21 → 5.02 (+19%), mean delay 8.1 s → 6.0 s (−2.1 s), p95 20.3 s → 14.0 s (−6.3 s)
//
// then, with more than one model, a line for each.
func (w *WhatIf) Write(out io.Writer) error {
	var what []string
	for _, c := range w.Changes {
		what = append(what, c.Setting+" "+c.From+" → "+c.To)
	}
	fmt.Fprintf(out, "%s: %s   (%d jobs scored)\n", strings.Join(what, ", "), w.All.line(), w.All.Base.Jobs)
	if len(w.Models) < 2 && len(w.Unscored) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, c := range w.Models {
		fmt.Fprintf(tw, "  %s\t%s\t(%d jobs)\n", c.Model, c.line(), c.Base.Jobs)
	}
	for _, m := range w.Unscored {
		fmt.Fprintf(tw, "  %s\tnot scored: no job after the warm-up\t\n", m)
	}
	return tw.Flush()
}

// line is a comparison's figures, before → after.
func (c Comparison) line() string {
	b, a := c.Base, c.Changed
	return fmt.Sprintf("polls/job %.2f → %.2f (%s%%), mean delay %.1f s → %.1f s (%s s), p95 %.1f s → %.1f s (%s s)",
		b.PollsPerJob, a.PollsPerJob, signed(c.PollsChangePct, 0),
		b.MeanDelayS, a.MeanDelayS, signed(c.MeanDelayChangeS, 1),
		b.P95DelayS, a.P95DelayS, signed(c.P95DelayChangeS, 1))
}

// signed writes x with its sign, a minus sign (−) for negatives, to prec
// decimals.
func signed(x float64, prec int) string {
	s := strconv.FormatFloat(x, 'f', prec, 64)
	switch {
	case strings.HasPrefix(s, "-") && strings.Trim(s, "-0.") == "":
		return "±" + s[1:] // rounds to zero
	case strings.HasPrefix(s, "-"):
		return "−" + s[1:]
	case strings.Trim(s, "0.") == "":
		return "±" + s
	}
	return "+" + s
}
