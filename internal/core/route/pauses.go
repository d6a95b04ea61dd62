package route

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Pause kinds.
const (
	PauseRateLimit = "rate_limit"
	PauseAuth      = "auth"
)

// Pause is a route-wide stop of provider calls, shared by the whole fleet
// through the routes bucket.
type Pause struct {
	// Until is when calls may start again.
	Until time.Time `json:"until"`
	// Kind is PauseRateLimit, PauseAuth or PauseOperator.
	Kind string `json:"kind"`
	// Reason is the provider's explanation, or the operator's.
	Reason string `json:"reason,omitempty"`
	// By names the operator who paused (PauseOperator only).
	By string `json:"by,omitempty"`
	// Strikes counts consecutive authentication failures; each doubles the
	// next auth pause.
	Strikes int `json:"strikes,omitempty"`
	// RateStrikes counts consecutive rate limits that named no
	// Retry-After; each doubles the next such pause.
	RateStrikes int `json:"rate_strikes,omitempty"`
	// Since is when the route was first paused in this episode.
	Since time.Time `json:"since"`
}

// Auth pause bounds: the first pause and the longest.
const (
	AuthPauseBase = 30 * time.Second
	AuthPauseMax  = 30 * time.Minute
)

// Pauses mirrors the routes bucket in memory and writes new pauses to it.
// A pause only ever extends: concurrent writers keep the later end.
type Pauses struct {
	kv  jetstream.KeyValue
	log zerolog.Logger
	now func() time.Time
	rnd *rand.Rand
	// Started, when set, observes each pause this process starts, by route
	// and kind. It must not block.
	Started func(route, kind string, d time.Duration)
	// AuthBase is the first authentication pause (default AuthPauseBase).
	AuthBase time.Duration

	// m maps routes to their pauses. It is read on every call and written
	// on a pause's start and end, so readers load it without a lock and
	// writers (serialised by mu) replace it with a changed copy.
	mu sync.Mutex
	m  atomic.Pointer[map[string]Pause]
	// recheck replaces OperatorRecheck when positive (SetRecheck).
	recheck atomic.Int64
}

// pause returns the route's pause as last seen.
func (p *Pauses) pause(route string) (Pause, bool) {
	ps, ok := (*p.m.Load())[route]
	return ps, ok
}

// change replaces the pauses with a copy that fn changed.
func (p *Pauses) change(fn func(m map[string]Pause)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := maps.Clone(*p.m.Load())
	fn(m)
	p.m.Store(&m)
}

// NewPauses returns a mirror of the routes bucket; Run keeps it current.
func NewPauses(kv jetstream.KeyValue, log zerolog.Logger) *Pauses {
	p := &Pauses{kv: kv, log: log, now: time.Now, rnd: schedule.NewRand(0)}
	p.m.Store(&map[string]Pause{})
	return p
}

// Run watches the bucket until ctx ends. It returns once the initial values
// are loaded only through ready (closed then), so callers can wait for it.
func (p *Pauses) Run(ctx context.Context, ready chan<- struct{}) error {
	// Pauses alone: a route's (its bare name), an account's and an
	// operator's; the bucket's other keys (events.UnresolvedKey) are the
	// census's.
	w, err := p.kv.WatchFiltered(ctx, []string{"*", "account.*", "operator.*"})
	if err != nil {
		return fmt.Errorf("watch route pauses: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok && ctx.Err() != nil {
				return nil // stopping: the watcher closed with ctx
			}
			if !ok {
				return errors.New("route pause watcher closed")
			}
			if e == nil {
				if ready != nil {
					close(ready)
					ready = nil
				}
				continue
			}
			p.apply(e)
		}
	}
}

func (p *Pauses) apply(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		p.change(func(m map[string]Pause) { delete(m, e.Key()) })
		return
	}
	var ps Pause
	if err := json.Unmarshal(e.Value(), &ps); err != nil {
		p.log.Warn().Err(err).Str(logkey.Route, e.Key()).Msg("ignoring unreadable route pause")
		return
	}
	p.change(func(m map[string]Pause) {
		if cur, ok := m[e.Key()]; !ok || !ps.Until.Before(cur.Until) || ps.Strikes != cur.Strikes || ps.RateStrikes != cur.RateStrikes {
			m[e.Key()] = ps
		}
	})
}

// Active returns the route's pause when one is in force.
func (p *Pauses) Active(route string) (Pause, bool) {
	ps, ok := p.pause(route)
	if !ok || !p.now().Before(ps.Until) {
		return Pause{}, false
	}
	return ps, true
}

// Remaining returns how long until calls to route may start again, with up
// to 10% (at least 100 ms) added, spread over the fleet so that it does
// not stampede when the pause ends; 0 when the route is not paused.
func (p *Pauses) Remaining(route string) time.Duration {
	ps, ok := p.Active(route)
	if !ok {
		return 0
	}
	return p.spread(ps.Until.Sub(p.now()))
}

// spread is d with up to 10 % (at least 100 ms) added at random.
func (p *Pauses) spread(d time.Duration) time.Duration {
	return d + schedule.Spread(max(d/10, 100*time.Millisecond), p.rnd)
}

// DefaultRateLimitPause is the pause after a rate limit that names no
// Retry-After; each one in a row doubles it, up to RateLimitPauseMax.
const DefaultRateLimitPause = 5 * time.Second

// RateLimitPauseMax bounds the pause after rate limits without
// Retry-After.
const RateLimitPauseMax = 5 * time.Minute

// PauseKey is where route r's rate-limit pauses are kept: its account's
// key ("account.<name>", which no route name can be) when it names one —
// the provider limits the account, whichever route's call it refused —
// else the route's own. Authentication pauses stay the route's: its token
// may be its own.
func (r *Route) PauseKey() string {
	if r.Account != "" {
		return "account." + r.Account
	}
	return r.Name
}

// Hold is how long calls on route r wait: the longest of its own pause,
// its account's and an operator's (OperatorRecheck at most), spread as
// Remaining spreads it.
func (p *Pauses) Hold(r *Route) time.Duration {
	d := max(p.Remaining(r.Name), p.operatorHold(r.Name))
	if k := r.PauseKey(); k != r.Name {
		d = max(d, p.Remaining(k))
	}
	return d
}

// After is the one place that decides what a provider call's outcome
// means for its route: a rate limit pauses the route for the provider's
// Retry-After (DefaultRateLimitPause when it gives none); refused
// credentials pause it with a growing backoff and a loud log line, failing
// no job; a success ends a run of authentication failures. Any other
// failure is the job's, not the route's. It returns how long calls wait
// now, spread over the fleet (0: no pause), after writing the pause for
// every process. A rate limit pauses the route's account when it names
// one (PauseKey); one without Retry-After pauses longer each time in a row
// (DefaultRateLimitPause doubling up to RateLimitPauseMax) until a call
// succeeds. op names the call ("submit", "status", "cancel") in the log.
func (p *Pauses) After(ctx context.Context, r *Route, op string, callErr error) time.Duration {
	route := r.Name
	if callErr == nil {
		keys := []string{route}
		if k := r.PauseKey(); k != route {
			keys = append(keys, k)
		}
		for _, key := range keys {
			if err := p.Recovered(ctx, key); err != nil {
				p.log.Warn().Err(err).Str(logkey.Route, route).Str(logkey.Op, op).Msg("clearing the route's strikes failed")
			}
		}
		return 0
	}
	log := p.log.With().Str(logkey.Route, route).Str(logkey.Op, op).Logger()
	var ps Pause
	var started bool
	var err error
	switch provider.ClassOf(callErr) {
	case provider.RateLimited:
		if r.SlotRefusal(callErr) {
			return 0 // the job waits for a slot again
		}
		key := r.PauseKey()
		ps, started, err = p.rateLimitedBy(ctx, key, provider.RetryAfterOf(callErr), provider.MessageOf(callErr), r.Learns())
		started = started && ps.Until.After(p.now())
		if started {
			log.Warn().Str(logkey.Paused, key).Time(logkey.PausedUntil, ps.Until).Int(logkey.Strikes, ps.RateStrikes).Msg("rate limited; paused")
		}
		route = key
	case provider.Auth:
		ps, started, err = p.authFailed(ctx, route, provider.MessageOf(callErr))
		if started {
			log.Error().Time(logkey.PausedUntil, ps.Until).Str(logkey.Reason, provider.MessageOf(callErr)).
				Msg("AUTHENTICATION FAILED: check the route's token; route paused, jobs kept")
		}
	default:
		return 0
	}
	if err != nil {
		// The pause is not shared (NATS is away): this process waits all
		// the same.
		log.Warn().Err(err).Msg("recording the route pause failed; this process holds its calls for it")
		d := DefaultRateLimitPause
		if provider.ClassOf(callErr) == provider.RateLimited {
			d = cmp.Or(provider.RetryAfterOf(callErr), d)
		}
		now := p.now().UTC()
		p.remember(route, Pause{Until: now.Add(d), Kind: PauseRateLimit, Reason: provider.MessageOf(callErr), Since: now})
		return p.spread(d)
	}
	d := ps.Until.Sub(p.now())
	if started && p.Started != nil && d > 0 {
		p.Started(route, ps.Kind, d)
	}
	return p.spread(max(d, 0))
}

// RateLimited pauses the route for d after a rate limit.
func (p *Pauses) RateLimited(ctx context.Context, route string, d time.Duration, reason string) (Pause, error) {
	ps, _, err := p.rateLimited(ctx, route, d, reason)
	return ps, err
}

func (p *Pauses) rateLimited(ctx context.Context, route string, d time.Duration, reason string) (Pause, bool, error) {
	return p.extend(ctx, route, func(cur Pause, now time.Time) Pause {
		cur.Kind, cur.Reason = PauseRateLimit, reason
		cur.Until = roundUp(now.Add(d), now)
		return cur
	})
}

// rateLimitedBy pauses key after a rate limit: for retryAfter when the
// provider named one, else for DefaultRateLimitPause doubled by each such
// rate limit in a row (one per episode: calls refused while the pause
// holds add none). On a route that learns its limits (learns), the first
// such rate limit in a row pauses nothing: the learned limit comes down
// instead (budget's learn.go, Running.Refused), and the pauses begin with
// the second — a refusal that lowering the limit did not prevent.
func (p *Pauses) rateLimitedBy(ctx context.Context, key string, retryAfter time.Duration, reason string, learns bool) (Pause, bool, error) {
	return p.extend(ctx, key, func(cur Pause, now time.Time) Pause {
		cur.Kind, cur.Reason = PauseRateLimit, reason
		if retryAfter > 0 {
			cur.Until = roundUp(now.Add(retryAfter), now)
			return cur
		}
		if now.Before(cur.Until) {
			return cur // paused already: the calls under way when it began
		}
		cur.RateStrikes++
		n := cur.RateStrikes
		if learns {
			if n == 1 {
				return cur // a strike, no pause
			}
			n--
		}
		cur.Until = now.Add(min(DefaultRateLimitPause<<min(n-1, 16), RateLimitPauseMax))
		return cur
	})
}

// AuthFailed pauses the route after refused credentials, each consecutive
// failure doubling the pause from AuthPauseBase up to AuthPauseMax.
func (p *Pauses) AuthFailed(ctx context.Context, route, reason string) (Pause, error) {
	ps, _, err := p.authFailed(ctx, route, reason)
	return ps, err
}

func (p *Pauses) authFailed(ctx context.Context, route, reason string) (Pause, bool, error) {
	return p.extend(ctx, route, func(cur Pause, now time.Time) Pause {
		if cur.Kind == PauseAuth && now.Before(cur.Until) {
			return cur // already paused for this; one strike per episode
		}
		cur.Strikes++
		cur.Kind, cur.Reason = PauseAuth, reason
		cur.Until = now.Add(min(cmp.Or(p.AuthBase, AuthPauseBase)<<min(cur.Strikes-1, 16), AuthPauseMax))
		return cur
	})
}

// Recovered clears the strikes (auth, rate limits) of a route or account
// key after a successful call, once its pause is over.
func (p *Pauses) Recovered(ctx context.Context, route string) error {
	cur, ok := p.pause(route)
	switch {
	case !ok:
		return nil
	case cur.Strikes > 0:
		// The token works again: an auth pause ends at once.
	case cur.RateStrikes == 0 || p.now().Before(cur.Until):
		return nil // a call under way when the rate-limit pause began
	}
	e, err := p.kv.Get(ctx, route)
	if err != nil {
		return err
	}
	if err := p.kv.Delete(ctx, route, jetstream.LastRevision(e.Revision())); err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return err
	}
	p.change(func(m map[string]Pause) { delete(m, route) })
	return nil
}

// extend writes the pause computed by next from the current one, keeping
// whichever ends later, with compare-and-set, and reports whether it
// wrote (false: the current pause stands).
func (p *Pauses) extend(ctx context.Context, route string, next func(Pause, time.Time) Pause) (Pause, bool, error) {
	for range 10 {
		var cur Pause
		var rev uint64
		e, err := p.kv.Get(ctx, route)
		switch {
		case err == nil:
			rev = e.Revision()
			if json.Unmarshal(e.Value(), &cur) != nil {
				cur = Pause{}
			}
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		default:
			return Pause{}, false, fmt.Errorf("read pause of route %s: %w", route, err)
		}
		now := p.now().UTC()
		if !now.Before(cur.Until) {
			cur.Since = now
		}
		want := next(cur, now)
		if covers(cur, want) {
			p.remember(route, cur)
			return cur, false, nil
		}
		b, _ := json.Marshal(want)
		if rev == 0 {
			_, err = p.kv.Create(ctx, route, b)
		} else {
			_, err = p.kv.Update(ctx, route, b, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return Pause{}, false, fmt.Errorf("pause route %s: %w", route, err)
		}
		p.remember(route, want)
		return want, true, nil
	}
	return Pause{}, false, fmt.Errorf("pause route %s: too many concurrent writers", route)
}

// covers reports whether pause cur makes want's write needless: the same
// strikes, and an end no earlier than want's.
func covers(cur, want Pause) bool {
	return !want.Until.After(cur.Until) && want.Strikes == cur.Strikes && want.RateStrikes == cur.RateStrikes
}

// roundUp is the end of a pause the provider sized (Retry-After) rounded
// up to its grain: a fiftieth of the pause, from 10 ms to a second. A
// storm of rate limits across the fleet
// — each call refused at once, each asking for the same Retry-After a few
// milliseconds after the last — then wants one end, which the first
// writer records and every other finds in force (covers), instead of
// every writer contending for the key with an end a little later (they
// ran out of tries: "too many concurrent writers"). Rounding up never
// shortens a pause: no call is made before the provider's Retry-After.
func roundUp(until, now time.Time) time.Time {
	grain := min(max(until.Sub(now)/50, 10*time.Millisecond), time.Second)
	if r := until.Truncate(grain); r.Before(until) {
		return r.Add(grain)
	}
	return until
}

// remember applies a pause locally at once, before the watch brings it.
func (p *Pauses) remember(route string, ps Pause) {
	p.change(func(m map[string]Pause) {
		if cur, ok := m[route]; !ok || ps.Until.After(cur.Until) || ps.Strikes != cur.Strikes || ps.RateStrikes != cur.RateStrikes {
			m[route] = ps
		}
	})
}
