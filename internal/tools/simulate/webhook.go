package simulate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Webhooks of the built-in workloads: each job's webhook is lost with the
// workload's miss chance, else it comes a lognormal lateness after the
// job's end.
const (
	webhookLateMedian = 1.0 // seconds
	webhookLateSigma  = 1.0
)

// webhookTruth is what the simulation knows of a model's webhooks: the
// share of its webhook jobs whose webhook was lost, the 90th percentile of
// the others' lateness (what the fleet learns and plans for), and its
// durations as a Dist, for Policy.WebhookPlan.
type webhookTruth struct {
	miss float64
	late time.Duration
	dist *schedule.Dist
}

// newWebhookTruth sums up jobs (of one model) expecting webhooks.
func newWebhookTruth(jobs []*Job) (*webhookTruth, error) {
	var lost int
	var lates, durations []float64
	for _, j := range jobs {
		durations = append(durations, j.Duration)
		if j.WebhookLost {
			lost++
		} else {
			lates = append(lates, j.WebhookLate)
		}
	}
	wt := &webhookTruth{miss: float64(lost) / float64(len(jobs))}
	if len(lates) > 0 {
		slices.Sort(lates)
		wt.late = dur(rank(lates, 0.9))
	}
	var err error
	wt.dist, err = histogram(durations)
	return wt, err
}

// The bins of a schedule.Dist (pkg/schedule/dist.go): binsPerOctave
// log-spaced bins an octave from distMinEdge seconds, distBins of them.
// TestHistogramIsTheDistOfTheDurations fails if they change there.
const (
	distBinsPerOctave = 8
	distBins          = 8 * 21
	distMinEdge       = 1.0 / 16
)

// histogram returns the Dist of durations (seconds) with every one
// weighing the same, undecayed: the true distribution, which Observe's
// decay would reduce to its last few hundred.
func histogram(durations []float64) (*schedule.Dist, error) {
	var w [distBins]float64
	for _, x := range durations {
		k := 0
		if x > distMinEdge {
			k = min(int(distBinsPerOctave*math.Log2(x/distMinEdge)), distBins-1)
		}
		w[k]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"v":1,"n":%d,"first":0,"w":[`, len(durations))
	for k, x := range w {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	}
	b.WriteString("]}")
	d := new(schedule.Dist)
	if err := d.UnmarshalJSON([]byte(b.String())); err != nil {
		return nil, fmt.Errorf("simulate: the true distribution as a Dist: %w", err)
	}
	return d, nil
}
