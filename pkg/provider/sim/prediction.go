package sim

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strings"
	"time"
)

// Prediction statuses, as Replicate spells them.
const (
	StatusStarting   = "starting"
	StatusProcessing = "processing"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	StatusCanceled   = "canceled"
	StatusAborted    = "aborted"
)

// Webhook events the sim sends; "output" and "logs" are accepted in a
// filter but never sent.
const (
	EventStart     = "start"
	EventOutput    = "output"
	EventLogs      = "logs"
	EventCompleted = "completed"
)

// FailureMessage is the error of a prediction that ends "failed".
const FailureMessage = "sim: injected failure (fail_rate)"

// progressSteps is the "it" total of the tqdm lines in logs.
const progressSteps = 100

type outcome int

const (
	outcomeSucceed outcome = iota
	outcomeFail
	outcomeNever
)

// isTerminal reports whether status is final.
func isTerminal(status string) bool {
	switch status {
	case StatusSucceeded, StatusFailed, StatusCanceled, StatusAborted:
		return true
	}
	return false
}

// prediction is the sim's record of one prediction. Its status is not
// stored: it follows from the times below and the time asked about. All
// fields are guarded by Server.mu.
type prediction struct {
	seq     uint64
	id      string
	model   string
	version string
	input   json.RawMessage
	key     string // Idempotency-Key, "" for none
	baseURL string
	// outputBytes, when positive, is the size of the output file the sim
	// serves itself (Config.OutputBytes); outputGone makes it answer 404.
	outputBytes int64
	outputGone  bool

	webhook     string
	filter      []string // as sent; nil when not given
	wantStart   bool
	wantDone    bool
	whMissing   bool
	whDuplicate bool
	whLate      bool

	createdAt time.Time
	startAt   time.Time // when it starts processing (unless ended before)
	endAt     time.Time // its natural end; unused for outcomeNever
	outcome   outcome
	failFrac  float64   // progress reached when it fails
	deadline  time.Time // Cancel-After; zero for none
	canceled  time.Time // user cancel; zero for none
	lostAt    time.Time // zero unless lost

	statusCalls     int
	webhookAttempts int
	webhookSent     bool
	startHandled    bool
	doneHandled     bool
}

// fate is what the seeded randomness decides for one prediction.
type fate struct {
	queue, run               time.Duration // real time
	outcome                  outcome
	failFrac                 float64
	lost                     bool
	lostFrac                 float64
	missing, duplicate, late bool
	outputGone               bool
}

// drawFate decides prediction n's fate. It always consumes the same draws
// from an RNG seeded by (seed, n), so prediction n's fate depends only on
// the seed, the model and the config.
func drawFate(seed int64, n uint64, m Model, f Faults, timeScale float64) fate {
	r := mrand.New(mrand.NewPCG(uint64(seed), n))
	zq, zr := r.NormFloat64(), r.NormFloat64()
	uOutcome, uFail := r.Float64(), r.Float64()
	uLost, uLostAt := r.Float64(), r.Float64()
	uMiss, uDup, uLate := r.Float64(), r.Float64(), r.Float64()
	uGone := r.Float64() // drawn last: the earlier draws are as before

	ft := fate{
		queue:      lognormal(time.Duration(m.QueueMedian), m.QueueSigma, zq, timeScale),
		run:        lognormal(time.Duration(m.RunMedian), m.RunSigma, zr, timeScale),
		failFrac:   0.1 + 0.8*uFail,
		lost:       uLost < f.LostRate,
		lostFrac:   0.05 + 0.9*uLostAt,
		missing:    uMiss < f.WebhookMissingRate,
		duplicate:  uDup < f.WebhookDuplicateRate,
		late:       uLate < f.WebhookLateRate,
		outputGone: uGone < f.OutputGoneRate,
	}
	switch {
	case uOutcome < m.NeverFinish:
		ft.outcome = outcomeNever
	case uOutcome < m.NeverFinish+m.FailRate:
		ft.outcome = outcomeFail
	default:
		ft.outcome = outcomeSucceed
	}
	return ft
}

// maxDuration caps drawn durations far below overflow (about 73 years).
const maxDuration = time.Duration(math.MaxInt64 / 4)

// lognormal returns median·e^(sigma·z), scaled to real time.
func lognormal(median time.Duration, sigma, z, timeScale float64) time.Duration {
	d := float64(median) * math.Exp(sigma*z) / timeScale
	if !(d < float64(maxDuration)) {
		return maxDuration
	}
	return time.Duration(d)
}

// newID returns a random id like Replicate's: 26 lowercase base32 chars.
func newID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))[:26]
}

// terminal returns the moment and status the prediction ends with, given
// what is known now (a later cancel can only make it earlier). ok is false
// when nothing will end it.
func (p *prediction) terminal() (at time.Time, status string, ok bool) {
	consider := func(t time.Time, s string) {
		if !t.IsZero() && (!ok || t.Before(at)) {
			at, status, ok = t, s, true
		}
	}
	switch p.outcome {
	case outcomeSucceed:
		consider(p.endAt, StatusSucceeded)
	case outcomeFail:
		consider(p.endAt, StatusFailed)
	}
	if !p.deadline.IsZero() {
		if p.deadline.Before(p.startAt) {
			consider(p.deadline, StatusAborted)
		} else {
			consider(p.deadline, StatusCanceled)
		}
	}
	consider(p.canceled, StatusCanceled)
	return at, status, ok
}

// snapshot is the state of a prediction at one moment.
type snapshot struct {
	at        time.Time // the moment described (frozen at lostAt when lost)
	status    string
	started   time.Time // zero when not started
	completed time.Time // zero when not completed
	lost      bool
}

// lostBy reports whether the prediction has vanished by t.
func (p *prediction) lostBy(t time.Time) bool {
	return !p.lostAt.IsZero() && !t.Before(p.lostAt)
}

// runningAt reports whether the prediction is non-terminal at t: created by
// then, neither terminal nor lost.
func (p *prediction) runningAt(t time.Time) bool {
	return !t.Before(p.createdAt) && !p.lostBy(t) && !isTerminal(p.at(t).status)
}

// at returns the prediction's state at t. A lost prediction stays as it
// was when it vanished.
func (p *prediction) at(t time.Time) snapshot {
	s := snapshot{at: t}
	if p.lostBy(t) {
		s.at, s.lost = p.lostAt, true
	}
	end, status, ok := p.terminal()
	switch {
	case ok && !s.at.Before(end):
		s.status, s.completed = status, end
		if status != StatusAborted && !end.Before(p.startAt) {
			s.started = p.startAt
		}
	case !s.at.Before(p.startAt):
		s.status, s.started = StatusProcessing, p.startAt
	default:
		s.status = StatusStarting
	}
	return s
}

// wirePrediction is Replicate's prediction object.
type wirePrediction struct {
	ID                  string             `json:"id"`
	Model               string             `json:"model"`
	Version             string             `json:"version"`
	Input               json.RawMessage    `json:"input"`
	Logs                string             `json:"logs"`
	Output              []string           `json:"output"`
	Error               *string            `json:"error"`
	Status              string             `json:"status"`
	CreatedAt           string             `json:"created_at"`
	StartedAt           *string            `json:"started_at"`
	CompletedAt         *string            `json:"completed_at"`
	URLs                wireURLs           `json:"urls"`
	Metrics             map[string]float64 `json:"metrics"`
	Webhook             string             `json:"webhook,omitempty"`
	WebhookEventsFilter []string           `json:"webhook_events_filter,omitempty"`
	Source              string             `json:"source"`
	DataRemoved         bool               `json:"data_removed"`
}

type wireURLs struct {
	Get    string `json:"get"`
	Cancel string `json:"cancel"`
	Stream string `json:"stream"`
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := formatTime(t)
	return &s
}

// wire renders the prediction as Replicate would answer at t.
func (p *prediction) wire(t time.Time) wirePrediction {
	s := p.at(t)
	base := p.baseURL + "/v1/predictions/" + p.id
	w := wirePrediction{
		ID:                  p.id,
		Model:               p.model,
		Version:             p.version,
		Input:               p.input,
		Logs:                p.logs(s),
		Status:              s.status,
		CreatedAt:           formatTime(p.createdAt),
		StartedAt:           optTime(s.started),
		CompletedAt:         optTime(s.completed),
		URLs:                wireURLs{Get: base, Cancel: base + "/cancel", Stream: base + "/stream"},
		Metrics:             map[string]float64{},
		Webhook:             p.webhook,
		WebhookEventsFilter: p.filter,
		Source:              "api",
	}
	switch s.status {
	case StatusSucceeded:
		w.Output = []string{p.outputURL()}
	case StatusFailed:
		msg := FailureMessage
		w.Error = &msg
	}
	if !s.completed.IsZero() {
		w.Metrics["total_time"] = s.completed.Sub(p.createdAt).Seconds()
		if !s.started.IsZero() {
			w.Metrics["predict_time"] = s.completed.Sub(s.started).Seconds()
		}
	}
	return w
}

// logs renders tqdm-style progress consistent with the time spent
// processing: elapsed/total of the planned run (a failing prediction stops
// at failFrac, a never-finishing one hangs at 99%).
func (p *prediction) logs(s snapshot) string {
	if s.started.IsZero() {
		return ""
	}
	end := s.at
	if !s.completed.IsZero() {
		end = s.completed
	}
	run := p.endAt.Sub(p.startAt)
	planned := run
	if p.outcome == outcomeFail {
		planned = time.Duration(float64(run) / p.failFrac)
	}
	elapsed := end.Sub(p.startAt)
	frac := 1.0
	if planned > 0 {
		frac = min(float64(elapsed)/float64(planned), 1)
	}
	if p.outcome == outcomeNever {
		frac = min(frac, 0.99)
	}
	if s.status == StatusSucceeded {
		frac = 1
	}
	n := int(frac * progressSteps)

	var b strings.Builder
	b.WriteString("sim: loading model\nsim: generating video\n")
	for k := 0; k < n; k += progressSteps / 10 {
		e := time.Duration(float64(planned) * float64(k) / progressSteps)
		b.WriteString(tqdmLine(k, e, planned-e))
		b.WriteByte('\n')
	}
	b.WriteString(tqdmLine(n, elapsed, max(planned-elapsed, 0)))
	b.WriteByte('\n')
	switch s.status {
	case StatusSucceeded:
		b.WriteString("sim: saved output.mp4\n")
	case StatusFailed:
		b.WriteString(FailureMessage + "\n")
	}
	return b.String()
}

var tqdmPartial = []string{" ", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}

// tqdmLine formats one progress line, e.g.
// " 45%|████▌     | 45/100 [00:01<00:01, 30.00it/s]".
func tqdmLine(n int, elapsed, remaining time.Duration) string {
	const width = 10
	cells := float64(n) / progressSteps * width
	full := int(cells)
	bar := strings.Repeat("█", full)
	if full < width {
		bar += tqdmPartial[int((cells-float64(full))*8)]
		bar += strings.Repeat(" ", width-full-1)
	}
	rate, left := "?it/s", "?"
	if n > 0 && elapsed > 0 {
		r := float64(n) / elapsed.Seconds()
		if r >= 1 {
			rate = fmt.Sprintf("%.2fit/s", r)
		} else {
			rate = fmt.Sprintf("%.2fs/it", 1/r)
		}
		left = clock(remaining)
	}
	return fmt.Sprintf("%3d%%|%s| %d/%d [%s<%s, %s]", n*100/progressSteps, bar, n, progressSteps, clock(elapsed), left, rate)
}

// clock formats like tqdm: mm:ss, or h:mm:ss from an hour on.
func clock(d time.Duration) string {
	sec := int64(d / time.Second)
	if sec >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", sec/3600, sec/60%60, sec%60)
	}
	return fmt.Sprintf("%02d:%02d", sec/60, sec%60)
}

// Prediction is the sim's ground truth about one prediction: what really
// happened, whether or not a client saw it.
type Prediction struct {
	// ID is the prediction id.
	ID string `json:"id"`
	// Model is the model name ("owner/name"), "" when only a version id
	// was given.
	Model string `json:"model"`
	// Version is the version id, "" when none was given.
	Version string `json:"version"`
	// IdempotencyKey is the Idempotency-Key of the create that made it.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Status is the true current status; a lost prediction keeps the
	// status it had when it vanished.
	Status string `json:"status"`
	// CreatedAt is when it was created.
	CreatedAt time.Time `json:"created_at"`
	// StartedAt is when it started processing; nil if it has not (yet).
	StartedAt *time.Time `json:"started_at"`
	// CompletedAt is when it reached its terminal status; nil if not (yet).
	CompletedAt *time.Time `json:"completed_at"`
	// Deadline is its Cancel-After deadline; nil for none.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Lost is true once it has vanished (GET answers 404).
	Lost bool `json:"lost"`
	// NeverFinish is true when it was drawn to stay processing forever.
	NeverFinish bool `json:"never_finish"`
	// StatusCalls counts GET calls for its id (including those answered
	// 429, 5xx or 404).
	StatusCalls int `json:"status_calls"`
	// Webhook is the webhook URL it was created with, "" for none.
	Webhook string `json:"webhook,omitempty"`
	// WebhookAttempts counts delivery attempts of its webhooks.
	WebhookAttempts int `json:"webhook_attempts"`
	// WebhookSent is true once a "completed" webhook got a 2xx answer.
	WebhookSent bool `json:"webhook_sent"`
	// WebhookMissing, WebhookDuplicate and WebhookLate are the webhook
	// faults drawn for its "completed" webhook.
	WebhookMissing   bool `json:"webhook_missing,omitempty"`
	WebhookDuplicate bool `json:"webhook_duplicate,omitempty"`
	WebhookLate      bool `json:"webhook_late,omitempty"`
}

func optTimeValue(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// truth returns the ground truth at now.
func (p *prediction) truth(now time.Time) Prediction {
	s := p.at(now)
	return Prediction{
		ID:               p.id,
		Model:            p.model,
		Version:          p.version,
		IdempotencyKey:   p.key,
		Status:           s.status,
		CreatedAt:        p.createdAt.UTC(),
		StartedAt:        optTimeValue(s.started),
		CompletedAt:      optTimeValue(s.completed),
		Deadline:         optTimeValue(p.deadline),
		Lost:             s.lost,
		NeverFinish:      p.outcome == outcomeNever,
		StatusCalls:      p.statusCalls,
		Webhook:          p.webhook,
		WebhookAttempts:  p.webhookAttempts,
		WebhookSent:      p.webhookSent,
		WebhookMissing:   p.webhook != "" && p.wantDone && p.whMissing,
		WebhookDuplicate: p.webhook != "" && p.wantDone && p.whDuplicate,
		WebhookLate:      p.webhook != "" && p.wantDone && p.whLate,
	}
}

// outputURL is where the prediction's output is: the sim's own file
// server when it serves outputs (Config.OutputBytes), else a URL of
// Replicate's delivery host that serves nothing.
func (p *prediction) outputURL() string {
	if p.outputBytes > 0 {
		return p.baseURL + "/files/" + p.id + "/output.mp4"
	}
	return "https://replicate.delivery/sim/" + p.id + "/output.mp4"
}
