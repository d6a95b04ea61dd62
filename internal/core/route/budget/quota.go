package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/events"
)

// Request quotas (an app's apps.<name>.rate, a front door token's rate=)
// hold across the fleet the way a call rate does: each is a budget of rate
// leases (Limit{Rate}) on POLLUX_SLOTS, of kind QuotaKind, that every
// front door takes from, so three front doors behind a balancer admit what
// one would. A request takes a lease and gives it back at once; the lease
// rests a second's share before it serves again: a second's worth at
// once, then the rate.

// QuotaKind is the kind of a request quota's leases.
const QuotaKind = "requests"

// Quotas are one process's request quotas, by scope (events.Scope of
// LevelApp, LevelToken), each set up on first use and again when its rate
// changes (a tokens file reloaded). A nil *Quotas limits nothing.
type Quotas struct {
	js    jetstream.JetStream
	ns    events.Namespace
	slots jetstream.Stream
	o     events.Options

	mu sync.Mutex
	by map[string]quota
}

type quota struct {
	rate float64
	b    *Budget
}

// NewQuotas returns the request quotas over the namespace's slots stream.
func NewQuotas(js jetstream.JetStream, ns events.Namespace, slots jetstream.Stream, o events.Options) *Quotas {
	return &Quotas{js: js, ns: ns, slots: slots, o: o, by: map[string]quota{}}
}

// ErrOverQuota refuses a request past its quota.
var ErrOverQuota = errors.New("request quota spent")

// Take takes one request from scope's quota of rate requests a second
// (rate > 0), waiting at most wait for a lease: ErrOverQuota when none
// came, another error when the quota could not be asked (NATS away).
func (q *Quotas) Take(ctx context.Context, scope string, rate float64, wait time.Duration) error {
	if q == nil || rate <= 0 {
		return nil
	}
	b, err := q.of(ctx, scope, rate)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	l, err := b.Acquire(ctx)
	switch {
	case err == nil:
		l.Release()
		return nil
	case errors.Is(err, ErrBusy), errors.Is(err, context.DeadlineExceeded):
		return ErrOverQuota
	}
	return err
}

// of returns scope's budget at rate, set up when it is new or its rate
// changed. Two processes (or requests) setting one up at once set up the
// same leases (Ensure is idempotent).
func (q *Quotas) of(ctx context.Context, scope string, rate float64) (*Budget, error) {
	q.mu.Lock()
	have, ok := q.by[scope]
	q.mu.Unlock()
	if ok && have.rate == rate {
		return have.b, nil
	}
	lvl, name := events.ParseScope(scope)
	b, err := ensure(ctx, q.js, q.ns, q.slots, scope, QuotaKind, Limit{Rate: rate}, q.o, lvl+" "+name, zerolog.Nop())
	if err != nil {
		return nil, fmt.Errorf("the request quota of %s %s: %w", lvl, name, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if cur, ok := q.by[scope]; ok && cur.rate == rate {
		return cur.b, nil
	}
	q.by[scope] = quota{rate: rate, b: b}
	return b, nil
}
