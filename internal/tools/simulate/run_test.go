package simulate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	smallOnce sync.Once
	small     *Result
	smallErr  error
)

// smallRun is a run with a sweep on two models, shared by the tests.
func smallRun(t *testing.T) *Result {
	t.Helper()
	smallOnce.Do(func() {
		var jobs []Job
		for _, name := range []string{"lognormal-0.25", "bimodal"} {
			w, _ := LookupWorkload(name)
			jobs = append(jobs, w.Jobs(1500, 5)...)
		}
		slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) })
		small, smallErr = Run(jobs, DefaultStrategies(), Config{Warmup: 100, Sweep: true})
	})
	require.NoError(t, smallErr)
	return small
}

func score(t *testing.T, res *Result, model, strategy string) Score {
	t.Helper()
	for _, sc := range res.Scores {
		if sc.Model == model && sc.Strategy == strategy {
			return sc
		}
	}
	t.Fatalf("no score for %s on %s", strategy, model)
	return Score{}
}

func TestRun(t *testing.T) {
	t.Parallel()
	res := smallRun(t)
	require.Len(t, res.Models, 2)
	require.Len(t, res.Scores, 2*7)
	for _, model := range []string{"lognormal-0.25", "bimodal"} {
		opt := score(t, res, model, "optimal")
		require.InDelta(t, 1, *opt.Ratio, 0.03, "optimal lies on its frontier")
		ad := score(t, res, model, "adaptive")
		require.Less(t, *ad.Ratio, 1.15, "adaptive near the frontier")
		require.Equal(t, 1400, ad.Jobs)
		seed := score(t, res, model, "seed-table")
		require.Greater(t, seed.PollsPerJob, ad.PollsPerJob)
	}
	require.Len(t, res.Matches, 2)
	for _, m := range res.Matches {
		require.NotNil(t, m.Adaptive, m.Model)
		require.LessOrEqual(t, m.Adaptive.MeanDelayS, m.Seed.MeanDelayS)
		require.LessOrEqual(t, m.Adaptive.P95DelayS, m.Seed.P95DelayS)
		require.Greater(t, m.Ratio(), 1.3)
	}
	require.Len(t, res.Sweeps, 2*7, "a sweep per strategy but optimal, and the frontier")
}

func TestRunIsReproducible(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("heavy-tail")
	strategies := []Strategy{{Name: "adaptive", kind: adaptive}, {Name: "google", kind: google}}
	a, err := Run(w.Jobs(800, 2), strategies, Config{Warmup: 50})
	require.NoError(t, err)
	b, err := Run(w.Jobs(800, 2), strategies, Config{Warmup: 50})
	require.NoError(t, err)
	require.Equal(t, a.Scores, b.Scores)
}

func TestRunRejects(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("bimodal")
	_, err := Run(nil, DefaultStrategies(), Config{})
	require.ErrorContains(t, err, "no jobs")
	_, err = Run(w.Jobs(10, 1), nil, Config{})
	require.ErrorContains(t, err, "no strategies")
	_, err = Run(w.Jobs(10, 1), DefaultStrategies(), Config{Warmup: 10})
	require.ErrorContains(t, err, "no jobs after the warm-up of 10")
	jobs := w.Jobs(10, 1)
	jobs[3], jobs[4] = jobs[4], jobs[3]
	_, err = Run(jobs, DefaultStrategies(), Config{})
	require.ErrorContains(t, err, "job 4 is submitted before job 3")
}

func TestWriteJSON(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, smallRun(t)))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 2*(7+1), "every strategy and the matched adaptive, by model")
	for _, line := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		for _, key := range []string{"strategy", "model", "jobs", "polls_per_job", "mean_delay_s", "p50_delay_s",
			"p95_delay_s", "p99_delay_s", "optimal_polls_at_same_mean_delay", "ratio"} {
			require.Contains(t, m, key)
		}
	}
	require.Contains(t, b.String(), `"strategy":"`+MatchedName+`"`)
}

func TestWriteTable(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, smallRun(t)))
	out := b.String()
	for _, want := range []string{"lognormal-0.25", "bimodal", "seed-table", "fixed:10", MatchedName, "targets:", "adaptive/frontier",
		"population/frontier", "mixes,", "all models"} {
		require.Contains(t, out, want)
	}
}

func TestWritePlot(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	require.NoError(t, WritePlot(&b, smallRun(t)))
	dec := xml.NewDecoder(&b)
	polylines := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "well-formed SVG")
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "polyline" {
			polylines++
		}
	}
	require.Equal(t, 2*7, polylines)
	require.ErrorContains(t, WritePlot(io.Discard, &Result{}), "no sweeps")
}

// In a mix, each model is learned and scored on its own: its figures are
// those of its jobs run alone, for a learning strategy and a randomised
// one alike.
func TestMixScoresEachModelApart(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("mixed")
	jobs := w.Jobs(300, 3)
	strategies := []Strategy{{Name: "adaptive", kind: adaptive}, {Name: "google", kind: google}, {Name: "optimal", kind: optimal}}
	mix, err := Run(jobs, strategies, Config{Warmup: 50})
	require.NoError(t, err)
	require.Len(t, mix.Models, 6)
	for _, md := range mix.Models {
		require.Equal(t, 300, md.Jobs, md.Name)
		require.Equal(t, 250, md.Scored, md.Name)
		var own []Job
		for _, j := range jobs {
			if j.Model == md.Name {
				own = append(own, j)
			}
		}
		alone, err := Run(own, strategies, Config{Warmup: 50})
		require.NoError(t, err)
		for _, s := range strategies {
			require.Equal(t, score(t, alone, md.Name, s.Name), score(t, mix, md.Name, s.Name), "%s, %s", md.Name, s.Name)
		}
	}
}

// The provider's progress reaches adaptive's policy: on the progress
// workload it polls far less, and finds jobs sooner, than on the same
// jobs without progress.
func TestProgressHelpsAdaptive(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("progress")
	jobs := w.Jobs(1500, 2)
	silent := slices.Clone(jobs)
	for i := range silent {
		silent[i].ProgressStep = 0
	}
	strategies := []Strategy{{Name: "adaptive", kind: adaptive}, {Name: "optimal", kind: optimal}}
	with, err := Run(jobs, strategies, Config{Warmup: 100})
	require.NoError(t, err)
	without, err := Run(silent, strategies, Config{Warmup: 100})
	require.NoError(t, err)
	require.True(t, with.Models[0].Progress)
	require.False(t, without.Models[0].Progress)
	a, b := score(t, with, "progress", "adaptive"), score(t, without, "progress", "adaptive")
	require.Less(t, a.PollsPerJob, 0.8*b.PollsPerJob)
	require.Less(t, a.MeanDelayS, b.MeanDelayS)
	require.Less(t, *a.Ratio, 0.8, "below the frontier of a poller without signals")
	require.Equal(t, score(t, with, "progress", "optimal"), score(t, without, "progress", "optimal"), "optimal has no signals")
}

// adaptive's target is 1.10× of the frontier, and below it where the
// provider reports progress, a signal the frontier lacks.
func TestTargetRow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ratio    float64
		progress bool
		want     string
	}{
		{1.08, false, "ok"}, {1.12, false, "miss"}, {0.97, true, "ok"}, {1.02, true, "miss"},
	} {
		ratio := tc.ratio
		res := &Result{
			Models:  []ModelInfo{{Name: "m", Progress: tc.progress}},
			Scores:  []Score{{Strategy: "adaptive", Model: "m", Ratio: &ratio}},
			Matches: []Match{{Model: "m"}},
		}
		fields := strings.Split(targetRow(res, res.Models[0]), "\t")
		require.Equal(t, tc.want, fields[2], "%+v", tc)
	}
}

// population plans each model's population, many other jobs of the same
// workload, where optimal plans the very jobs it is scored on: near the
// frontier on a large sample, further from it on a small one, where the
// frontier knows its sample. It needs a population of every model.
func TestPopulation(t *testing.T) {
	t.Parallel()
	pop, _ := ParseStrategy(PopulationName)
	opt, _ := ParseStrategy("optimal")
	w, _ := LookupWorkload("lognormal-0.5")
	cfg := Config{Warmup: 100, Population: w.Population(30_000, 1)}
	large, err := Run(w.Jobs(3000, 1), []Strategy{opt, pop}, cfg)
	require.NoError(t, err)
	small, err := Run(w.Jobs(300, 1), []Strategy{opt, pop}, cfg)
	require.NoError(t, err)
	require.InDelta(t, 1, *score(t, large, "lognormal-0.5", "optimal").Ratio, 0.02)
	require.InDelta(t, 1, *score(t, large, "lognormal-0.5", PopulationName).Ratio, 0.05, "the model's optimum is near its sample's on 2 900 jobs")
	require.Greater(t, *score(t, small, "lognormal-0.5", PopulationName).Ratio, 1.05, "and further on 200, whose frontier knows them")

	_, err = Run(w.Jobs(300, 1), []Strategy{pop}, Config{})
	require.ErrorContains(t, err, "no population")
	other, _ := LookupWorkload("bimodal")
	_, err = Run(w.Jobs(300, 1), []Strategy{pop}, Config{Population: other.Population(1000, 1)})
	require.ErrorContains(t, err, "model lognormal-0.5 has no population")
}

// A mix's weighted figure sums its models' polls and the frontier's at
// their mean delays, each model's jobs weighing alike.
func TestWeighted(t *testing.T) {
	t.Parallel()
	f := func(x float64) *float64 { return &x }
	res := &Result{
		Models: []ModelInfo{{Name: "m/a"}, {Name: "m/b"}},
		Scores: []Score{
			{Strategy: "adaptive", Model: "m/a", Jobs: 100, PollsPerJob: 4, OptimalPolls: f(4)},
			{Strategy: "adaptive", Model: "m/b", Jobs: 300, PollsPerJob: 10, OptimalPolls: f(8)},
			{Strategy: PopulationName, Model: "m/a", Jobs: 100, PollsPerJob: 4, OptimalPolls: f(3)},
			{Strategy: PopulationName, Model: "m/b", Jobs: 300, PollsPerJob: 8, OptimalPolls: nil},
		},
	}
	got, ok := Weighted(res, "adaptive")
	require.True(t, ok)
	require.InDelta(t, (4*100+10*300)/(4*100+8*300.0), got, 1e-12)
	_, ok = Weighted(res, PopulationName)
	require.False(t, ok, "a model out of the frontier's reach")
	_, ok = Weighted(res, "google")
	require.False(t, ok)
	fields := strings.Split(mixRow(res), "\t")
	require.Equal(t, []string{"m", "2", "1.21", "miss", ""}, fields[:5])
}
