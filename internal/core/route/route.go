package route

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/atlas"
	"github.com/pollux-dev/pollux/pkg/provider/fal"
	"github.com/pollux-dev/pollux/pkg/provider/generic"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/provider/runway"
	"github.com/pollux-dev/pollux/pkg/provider/veo"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Route is one configured provider account, ready to use.
type Route struct {
	// Name is the route's name (a subject token).
	Name string
	// Adapter talks to the provider.
	Adapter provider.Adapter
	// Webhooks verifies and decodes deliveries; nil when the provider
	// sends none.
	Webhooks provider.Webhooks
	// Callbacks reads unsigned callbacks, taken as hints; nil when the
	// provider sends none (or signs them: see Webhooks).
	Callbacks provider.Callbacks
	// CallbackSecret keys the per-job token of callback URLs; nil for no
	// token.
	CallbackSecret []byte
	// WebhookURL is the public URL of the route's webhook endpoint, "" for
	// no webhooks.
	WebhookURL string
	// Policy schedules the route's polls.
	Policy schedule.Policy
	// Deadline is the default job deadline, MaxDeadline the longest allowed.
	Deadline, MaxDeadline time.Duration
	// SubmitWorkers and StatusWorkers are the per-process concurrency.
	SubmitWorkers, StatusWorkers int
	// Account is the provider account the route spends ("" for none).
	Account string
	// TenantKey is the metadata key of a submission's tenant ("": its
	// app is — and a submission of no app is one tenant's), and Weights the tenants' shares of the
	// admission queue (default 1).
	TenantKey string
	Weights   map[string]float64
	// Levels are the budget levels the route's calls and running jobs
	// count against, widest first: the global level, the account's, the
	// route's own. Build sets all three; New the route's.
	Levels []budget.Level
	// NotFoundLimit consecutive "unknown job" answers mark a job lost.
	NotFoundLimit int
	// CancelOnDeadline asks the provider to cancel a job expired at its
	// deadline, where the adapter can cancel.
	CancelOnDeadline bool
	// KeepInputs keeps a job's input on its record after the provider
	// has the job (config.Route.KeepInputs).
	KeepInputs bool
	// SettingsFrom names the input fields a submission's configuration
	// key is made of when it gives none (see ConfigKey).
	SettingsFrom []string
	// LengthFrom names the input field of a job's requested output length
	// (see Length).
	LengthFrom string
	// Partitions is how many consumers share the route's checks.
	Partitions int
	// CallTimeout bounds one provider call (0: the service's default).
	CallTimeout time.Duration
	// WebhookMaxBody caps a delivery.
	WebhookMaxBody int64
	// Inputs, when set, turns the input files a job's input names by
	// reference (pollux-input://, package inputs) into what the
	// provider takes, on every create and find the gate makes: a signed
	// URL or the bytes inline. Its errors are *provider.Error values (a
	// file gone is Invalid: the job fails saying which field). Nil: the
	// input goes as it is.
	Inputs func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)
}

// Defaults of route settings.
const (
	DefaultDeadline       = time.Hour
	DefaultMaxDeadline    = 24 * time.Hour
	DefaultSubmitWorkers  = 4
	DefaultStatusWorkers  = 16
	DefaultNotFoundLimit  = 3
	DefaultWebhookMaxBody = 1 << 20
)

// Registry is the set of adapter kinds Pollux ships.
var Registry = provider.Registry{
	replicate.Kind: replicate.New,
	fal.Kind:       fal.New,
	runway.Kind:    runway.New,
	veo.Kind:       veo.New,
	atlas.Kind:     atlas.New,
	generic.Kind:   generic.New,
}

// JobWebhookURL returns the callback URL for one job on a route: the route's
// webhook URL with the job id as the "job" query parameter, and, for
// unsigned callbacks with a secret, the job's token as "token".
func (r *Route) JobWebhookURL(jobID string) string {
	if r.WebhookURL == "" {
		return ""
	}
	u, err := url.Parse(r.WebhookURL)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("job", jobID)
	if r.Callbacks != nil && len(r.CallbackSecret) > 0 {
		q.Set("token", r.CallbackToken(jobID))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// CallbackToken is the unguessable token of a job's callback URL.
func (r *Route) CallbackToken(jobID string) string {
	m := hmac.New(sha256.New, r.CallbackSecret)
	m.Write([]byte(r.Name + "\x00" + jobID))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// ValidCallbackToken reports whether token is the job's (always true when
// the route has no callback secret).
func (r *Route) ValidCallbackToken(jobID, token string) bool {
	if len(r.CallbackSecret) == 0 {
		return true
	}
	return hmac.Equal([]byte(token), []byte(r.CallbackToken(jobID)))
}

func limit(b config.Budget, learn bool) budget.Limit {
	return budget.Limit{Concurrency: b.Concurrency, Rate: float64(b.Rate), LeaseWait: b.LeaseWait, Learn: learn}
}

// level is one budget level from its configuration.
func level(lvl, name string, b config.Budgets) budget.Level {
	return budget.Level{Level: lvl, Name: name, Submit: limit(b.Submit, b.LearnRate), Status: limit(b.Status, b.LearnRate),
		Running: b.Running, Learn: b.LearnRunning}
}

// weights keys tenant weights by their subject tokens.
func weights(w map[string]float64) map[string]float64 {
	if len(w) == 0 {
		return nil
	}
	out := make(map[string]float64, len(w))
	for tenant, v := range w {
		out[events.TenantToken(tenant)] = v
	}
	return out
}

// Queue is the admission queue of the route's submissions that wait for
// running slots: its account's scope when it names one (the account's
// routes share it and its fairness), else its own.
func (r *Route) Queue() string {
	if r.Account != "" {
		return events.Scope(events.LevelAccount, r.Account)
	}
	return events.Scope(events.LevelRoute, r.Name)
}

// Learns reports whether any of the route's levels learns a limit (its
// running cap or a call rate) from the provider's refusals.
func (r *Route) Learns() bool {
	return slices.ContainsFunc(r.Levels, func(l budget.Level) bool { return l.Learn || l.Submit.Learn || l.Status.Learn })
}

// SlotRefusal reports whether err refuses a create for the provider's cap
// on jobs running at once (provider.ConcurrencyLimited, no Retry-After) on
// a route that caps its running jobs: the job waits for a running slot
// again instead of pausing the route, whose status calls the refusal is
// not about.
func (r *Route) SlotRefusal(err error) bool {
	return r.Capped() && provider.ConcurrencyLimited(err) && provider.RetryAfterOf(err) == 0
}

// Capped reports whether a level of the route caps its running jobs.
func (r *Route) Capped() bool {
	for _, l := range r.Levels {
		if l.Running > 0 || l.Learn {
			return true
		}
	}
	return false
}

// Tenant is the tenant of job j, as a subject token (events.TenantToken):
// the value of its metadata's TenantKey when the route names one, else its
// app.
func (r *Route) Tenant(j *state.Job) string {
	if r.TenantKey == "" {
		return events.TenantToken(j.App)
	}
	return events.TenantToken(j.Metadata[r.TenantKey])
}

// Weight is a tenant's share (token as Tenant returns it).
func (r *Route) Weight(tenant string) float64 {
	if w, ok := r.Weights[tenant]; ok {
		return w
	}
	return 1
}

// Level returns the route's budget level of kind lvl (events.LevelGlobal,
// LevelAccount, LevelRoute), and whether the route has it.
func (r *Route) Level(lvl string) (budget.Level, bool) {
	for _, l := range r.Levels {
		if l.Level == lvl {
			return l, true
		}
	}
	return budget.Level{}, false
}

// Build makes the routes of a configuration, reading each route's secrets.
// Scale compresses the schedule for demos and tests (0 or 1: real time).
func Build(c *config.Config, reg provider.Registry, hc *http.Client, scale float64, log zerolog.Logger) (map[string]*Route, error) {
	out := make(map[string]*Route, len(c.Routes))
	for _, name := range c.RouteNames() {
		rc := c.Routes[name]
		token, err := rc.Token()
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", name, err)
		}
		secret, err := rc.WebhookSecret()
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", name, err)
		}
		opts, err := rc.OptionsJSON()
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", name, err)
		}
		a, err := reg.New(provider.Config{
			Route: name, Kind: rc.Kind, BaseURL: rc.BaseURL, Token: token, WebhookSecret: secret,
			Options: opts, HTTPClient: hc, Logger: log.With().Str(logkey.Route, name).Logger(),
		})
		if err != nil {
			return nil, err
		}
		r, err := New(name, a, rc, scale)
		if err != nil {
			return nil, err
		}
		levels := []budget.Level{level(events.LevelGlobal, "", c.Budgets)}
		if rc.Account != "" {
			levels = append(levels, level(events.LevelAccount, rc.Account, c.Accounts[rc.Account].Budgets))
		}
		r.Levels = append(levels, r.Levels...)
		if rc.Account != "" {
			r.Weights = weights(c.Accounts[rc.Account].TenantWeights)
		}
		cs, err := rc.CallbackSecret()
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", name, err)
		}
		if cs != "" && len(cs) < 16 {
			return nil, fmt.Errorf("route %s: callback secret: at least 16 bytes", name)
		}
		r.CallbackSecret = []byte(cs)
		out[name] = r
	}
	return out, nil
}

// New makes a route from its adapter and settings.
func New(name string, a provider.Adapter, rc config.Route, scale float64) (*Route, error) {
	r := &Route{
		Name:             name,
		Adapter:          a,
		WebhookURL:       rc.WebhookURL,
		Deadline:         cmp.Or(rc.Deadline, DefaultDeadline),
		MaxDeadline:      cmp.Or(rc.MaxDeadline, DefaultMaxDeadline),
		SubmitWorkers:    cmp.Or(rc.Workers.Submit, DefaultSubmitWorkers),
		StatusWorkers:    cmp.Or(rc.Workers.Status, DefaultStatusWorkers),
		NotFoundLimit:    cmp.Or(rc.NotFoundLimit, DefaultNotFoundLimit),
		SettingsFrom:     slices.Clone(rc.SettingsFrom),
		LengthFrom:       rc.LengthFrom,
		CancelOnDeadline: rc.CancelOnDeadline == nil || *rc.CancelOnDeadline,
		KeepInputs:       rc.KeepInputs,
		Partitions:       max(rc.Partitions, 1),
		CallTimeout:      rc.CallTimeout,
		WebhookMaxBody:   cmp.Or(rc.WebhookMaxBody, DefaultWebhookMaxBody),
		Account:          rc.Account,
		TenantKey:        rc.TenantKey,
		Weights:          weights(rc.TenantWeights),
		Levels:           []budget.Level{level(events.LevelRoute, name, rc.Budgets)},
		Policy: schedule.Policy{
			MaxDelay: rc.Poll.MaxDelay, MinDelay: rc.Poll.MinDelay, Jitter: rc.Poll.Jitter,
			WebhookGrace: rc.Poll.WebhookGrace, Reconcile: rc.Poll.Reconcile, ErrorBase: rc.Poll.ErrorBase,
			PollCost: rc.Poll.PollCost, MinSamples: rc.Poll.MinSamples, Scale: scale,
		}.WithDefaults(),
	}
	if floor := a.Info().PollFloor; floor > 0 {
		r.Policy.MinDelay = max(r.Policy.MinDelay, time.Duration(float64(floor)*r.Policy.Scale))
	}
	wh, signed := a.(provider.Webhooks)
	cb, unsigned := a.(provider.Callbacks)
	switch {
	case signed && a.Info().Webhooks:
		r.Webhooks = wh
	case unsigned && a.Info().Callbacks && rc.WebhookURL != "":
		r.Callbacks = cb
	case rc.WebhookURL != "":
		return nil, fmt.Errorf("route %s: webhook_url is set, but %s sends no webhooks", name, a.Info().Kind)
	}
	return r, nil
}

// Learned is what the fleet learned that the schedule and model routes
// use (package learn's Stats): a route's model and configuration key's
// durations (nil when none are learned), the route's webhook miss chance
// and lateness (a miss of 0 when unknown), and the share of a model's
// recent jobs on the route that failed or were lost.
type Learned interface {
	Lookup(route, model, configKey string, length float64) (total, run *schedule.Dist)
	Webhook(route string) (miss float64, late time.Duration)
	Failures(route, model string) (rate, weight float64)
}

// endsLearned is what Learned may also say: how the model's jobs end,
// the times of those that did not succeed and their share
// (learn.Stats.Failed; schedule.Job.LearnedFailed).
type endsLearned interface {
	Failed(route, model string) (times *schedule.Dist, share float64)
}

// Hints are what one successful provider answer says of the next poll —
// its poll-after hint and its estimate of the time left — and how fast the
// route's queue moves, as the fleet learned it (places a second; it makes
// a queued job's place an estimate of its wait). They hold for the
// decision at hand only; the zero value is none.
type Hints struct {
	PollAfter, ETA time.Duration
	QueueRate      float64
}

// HintsOf returns the hints of a successful answer.
func HintsOf(st provider.Status) Hints {
	return Hints{PollAfter: st.PollAfter, ETA: st.ETA}
}

// NextPoll is how long job's next poll waits by the route's schedule,
// given its poll state at now and the hints of the answer just had: the
// one view of a job the schedule decides on.
func (r *Route) NextPoll(ps *events.PollState, now time.Time, h Hints, learned Learned, rnd *rand.Rand) time.Duration {
	return r.Policy.Next(r.ScheduleJob(ps, now, h, learned), rnd)
}

// ScheduleJob is the schedule's view of a job with poll state ps at now.
func (r *Route) ScheduleJob(ps *events.PollState, now time.Time, h Hints, learned Learned) schedule.Job {
	sj := schedule.Job{
		Now: now, Submitted: cmp.Or(ps.SubmittedAt, ps.CreatedAt), Polls: ps.Polls, Unchanged: ps.Unchanged,
		Expected: time.Duration(ps.Expected), Deadline: ps.Deadline, WebhookExpected: ps.Webhook,
		Errors: ps.Errors, StartedAt: ps.StartedAt, PollAfter: h.PollAfter, ETA: h.ETA, QueueRate: h.QueueRate,
	}
	if ps.Progress != nil {
		sj.Progress = *ps.Progress
	}
	if ps.QueuePosition != nil {
		sj.QueuePosition = *ps.QueuePosition
	}
	switch ps.State {
	case state.Queued, state.Pending:
		sj.Phase = schedule.PhaseQueued
	case state.Running:
		sj.Phase = schedule.PhaseRunning
	}
	if learned != nil {
		sj.Learned, sj.LearnedRun = learned.Lookup(r.Name, ps.Model, ps.ConfigKey, ps.Length)
		if e, ok := learned.(endsLearned); ok {
			sj.LearnedFailed, sj.FailedShare = e.Failed(r.Name, ps.Model)
		}
		if sj.WebhookExpected {
			sj.WebhookMiss, sj.WebhookLate = learned.Webhook(r.Name)
		}
	}
	return sj
}
