package simulate

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Job is one job of a workload, in seconds of virtual time.
type Job struct {
	// Model names the job's distribution; each model is learned and scored
	// on its own.
	Model string
	// Submit is when the provider accepted the job, from the run's start.
	Submit float64
	// Queue is how long the job waited before it started; it is never
	// longer than Duration (a job that ends while queued never runs).
	Queue float64
	// Duration is the time from acceptance to the terminal state.
	Duration float64
	// Outcome is the terminal state: succeeded, failed or canceled. Every
	// outcome is detected the same way.
	Outcome string
	// ProgressStep, when above 0, is the step in which the provider
	// reports a running job's completed share (0.05: 0%, 5%, … 95%): its
	// elapsed share of the run time, give or take progressNoise, rounded
	// down to the step. 0 reports none; a trace reports none.
	ProgressStep float64
	// Webhook is true when the provider calls back at the job's end: the
	// job is then resolved by its webhook WebhookLate seconds after its
	// end, unless WebhookLost, or a poll found the end first. A trace's
	// jobs expect none.
	Webhook     bool
	WebhookLost bool
	WebhookLate float64
}

// progressNoise is how far, at most, a reported completed share strays
// from the elapsed share of the run time, before it is rounded down to the
// step.
const progressNoise = 0.03

// progressAt is the completed share the provider reports at now for job
// i, running then; 0 is none (as for schedule.Job.Progress). The noise is
// a function of the job and the instant, the same for every strategy.
func (j *Job) progressAt(i int, now float64) float64 {
	if j.ProgressStep <= 0 {
		return 0
	}
	f := (now - j.Submit - j.Queue) / (j.Duration - j.Queue)
	f += progressNoise * (2*unitHash(uint64(i), math.Float64bits(now)) - 1)
	f = math.Floor(f/j.ProgressStep+1e-9) * j.ProgressStep
	return min(max(f, 0), 1-j.ProgressStep)
}

// unitHash maps two words to [0, 1) (splitmix64's finaliser).
func unitHash(a, b uint64) float64 {
	x := a*0x9e3779b97f4a7c15 ^ b
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// end is when the job reaches its terminal state.
func (j *Job) end() float64 { return j.Submit + j.Duration }

// ran reports whether the job started before it ended.
func (j *Job) ran() bool { return j.Queue < j.Duration }

// Outcomes are the terminal states a trace may name.
var Outcomes = []string{"succeeded", "failed", "canceled"}

// traceColumns are the columns of a trace, in any order.
var traceColumns = []string{"model", "submit_s", "queue_s", "duration_s", "outcome"}

// ReadTrace reads a CSV trace: a header naming the columns model,
// submit_s, queue_s, duration_s and outcome (in any order), then one job a
// line in submit order. An error names the line and field at fault.
func ReadTrace(r io.Reader) ([]Job, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(traceColumns)
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	head, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("trace: empty; want a header " + strings.Join(traceColumns, ","))
	}
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	col := map[string]int{}
	for i, name := range head {
		name = strings.TrimSpace(name)
		if !slices.Contains(traceColumns, name) {
			return nil, fmt.Errorf("trace: line 1: unknown column %q; want %s", name, strings.Join(traceColumns, ","))
		}
		if _, dup := col[name]; dup {
			return nil, fmt.Errorf("trace: line 1: column %q appears twice", name)
		}
		col[name] = i
	}

	var jobs []Job
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		j, err := parseJob(rec, col)
		if err != nil {
			return nil, fmt.Errorf("trace: line %d: %w", line, err)
		}
		if n := len(jobs); n > 0 && j.Submit < jobs[n-1].Submit {
			return nil, fmt.Errorf("trace: line %d: submit_s: %g is before the previous job's %g; jobs must be in submit order", line, j.Submit, jobs[n-1].Submit)
		}
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return nil, errors.New("trace: no jobs after the header")
	}
	return jobs, nil
}

// parseJob reads one record of a trace.
func parseJob(rec []string, col map[string]int) (Job, error) {
	field := func(name string) string { return strings.TrimSpace(rec[col[name]]) }
	num := func(name string) (float64, error) {
		s := field(name)
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("%s: %q is not a finite number", name, s)
		}
		if x < 0 {
			return 0, fmt.Errorf("%s: %g is negative", name, x)
		}
		return x, nil
	}
	j := Job{Model: field("model"), Outcome: field("outcome")}
	if j.Model == "" {
		return Job{}, errors.New("model: empty")
	}
	if !slices.Contains(Outcomes, j.Outcome) {
		return Job{}, fmt.Errorf("outcome: %q is not one of %s", j.Outcome, strings.Join(Outcomes, ", "))
	}
	var err error
	if j.Submit, err = num("submit_s"); err != nil {
		return Job{}, err
	}
	if j.Queue, err = num("queue_s"); err != nil {
		return Job{}, err
	}
	if j.Duration, err = num("duration_s"); err != nil {
		return Job{}, err
	}
	switch {
	case j.Duration == 0:
		return Job{}, errors.New("duration_s: must be > 0")
	case j.Queue > j.Duration:
		return Job{}, fmt.Errorf("queue_s: %g is longer than duration_s %g", j.Queue, j.Duration)
	}
	return j, nil
}

// WriteTrace writes jobs as a CSV trace that ReadTrace reads back: the
// header model,submit_s,queue_s,duration_s,outcome, then one job a line,
// times in seconds to the millisecond.
func WriteTrace(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(traceColumns); err != nil {
		return err
	}
	for _, j := range jobs {
		if err := cw.Write([]string{j.Model, secs3(j.Submit), secs3(j.Queue), secs3(j.Duration), j.Outcome}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func secs3(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
