package ingest

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The admission queue. Submissions on routes with running caps that find a
// level full, or others waiting before them, wait as tickets in the
// waiting stream (events.Waiting: one subject per queue and tenant, each in
// arrival order). Every ingest process serving a route of the queue runs
// its admission loop: while slots come free it starts the tickets' jobs,
// choosing among the tenants with tickets by weighted fair queueing
// (start-time fair queueing: the tenant with the least weighted service
// goes next, and a tenant that starts waiting starts level with the
// others), each tenant's oldest first. Starting a job is what a redelivered
// submission does (resume); its ticket is deleted once the job is
// submitted or ended. Two processes that pick one ticket at once take one
// slot (a job's slot is its own) and make one attempt (jobs.Intake.Attempt
// is exclusive): the second finds the first's attempt and leaves it.

// How often a queue looks for tickets when nothing wakes it: often while
// jobs wait (a slot freed by another process is seen this late), seldom
// while none do (new tickets of this process wake it; another process's
// are seen this late).
const (
	queueTickWaiting = 25 * time.Millisecond
	queueTickIdle    = 250 * time.Millisecond
)

// queue is one admission queue as this process serves it.
type queue struct {
	name   string
	routes map[string]*route.Route
	// waiting is how many tickets the last look found; a submission that
	// finds some queues behind them.
	waiting atomic.Int64
	wake    chan struct{}
	sem     chan struct{} // admissions under way
	// observed is when the queue's gauges were last set.
	observed time.Time
	// start runs an admission (set by admitLoop, which waits for them).
	start func(func(context.Context))

	mu        sync.Mutex
	vt        map[string]float64 // each tenant's weighted service
	inflight  map[string]bool
	notBefore map[string]time.Time
}

func newQueue(name string) *queue {
	return &queue{
		name: name, routes: map[string]*route.Route{}, wake: make(chan struct{}, 1),
		vt: map[string]float64{}, inflight: map[string]bool{}, notBefore: map[string]time.Time{},
	}
}

// add makes r one of the queue's routes; the queue starts as many jobs at
// once as its routes have submit workers.
func (q *queue) add(r *route.Route) {
	q.routes[r.Name] = r
	n := 0
	for _, r := range q.routes {
		n += r.SubmitWorkers
	}
	q.sem = make(chan struct{}, n)
}

// tick is how long the loop rests when nothing wakes it.
func (q *queue) tick() time.Duration {
	if q.busy() {
		return queueTickWaiting
	}
	return queueTickIdle
}

// busy reports whether tickets wait in the queue.
func (q *queue) busy() bool { return q.waiting.Load() > 0 }

// queued notes a ticket this process published, and wakes the loop.
func (q *queue) queued() {
	q.waiting.Add(1)
	q.poke()
}

func (q *queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// weight is a tenant's share, the first of the queue's routes that sets
// one (an account's routes share its weights).
func (q *queue) weight(tenant string) float64 {
	for _, r := range q.routes {
		if _, ok := r.Weights[tenant]; ok {
			return r.Weight(tenant)
		}
	}
	return 1
}

// charge counts a start of tenant's in its weighted service: 1/weight, so
// a tenant of weight 3 starts three jobs for another's one. q.mu must be
// held.
func (q *queue) charge(tenant string) {
	q.vt[tenant] += 1 / q.weight(tenant)
}

// order returns the tenants by their weighted service, least first. A
// tenant new to the queue, or back after a pause, starts at the least
// service among the others: it is neither owed the past nor behind.
func (q *queue) order(tenants []string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	floor := math.Inf(1)
	for _, t := range tenants {
		if v, ok := q.vt[t]; ok {
			floor = min(floor, v)
		}
	}
	if math.IsInf(floor, 1) {
		floor = 0
	}
	for _, t := range tenants {
		if v, ok := q.vt[t]; !ok || v < floor {
			q.vt[t] = floor
		}
	}
	// Forget tenants with nothing waiting.
	for t := range q.vt {
		if !slices.Contains(tenants, t) {
			delete(q.vt, t)
		}
	}
	out := slices.Clone(tenants)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(q.vt[a], q.vt[b]), strings.Compare(a, b))
	})
	return out
}

// admitDrain is how long admissions under way at a stop may go on: a
// create answered meanwhile is recorded.
const admitDrain = 15 * time.Second

// admitLoop starts waiting jobs as slots come free, until ctx ends; then
// it waits for the admissions under way, for at most admitDrain.
func (s *Service) admitLoop(ctx context.Context, q *queue) error {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var under sync.WaitGroup
	defer under.Wait()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(admitDrain, cancel)
		under.Wait()
		t.Stop()
	})
	defer stop()
	q.start = func(f func(context.Context)) { under.Go(func() { f(actx) }) }
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-q.wake:
		case <-time.After(schedule.Jitter(q.tick(), schedule.RetryJitter, s.rnd)):
		}
		if err := s.admitRound(ctx, q); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Str(logkey.Queue, q.name).Msg("admitting waiting jobs failed; retrying")
		}
	}
}

// admitRound starts as many waiting jobs as slots and workers allow, one
// tenant at a time by weighted service.
func (s *Service) admitRound(ctx context.Context, q *queue) error {
	info, err := s.waiting.Info(ctx, jetstream.WithSubjectFilter(s.ns.Waiting(q.name, "*")))
	if err != nil {
		return err
	}
	total := int64(0)
	var tenants []string
	for subject, n := range info.State.Subjects {
		total += int64(n)
		tenants = append(tenants, s.ns.RunningJob(subject)) // the last token
	}
	q.waiting.Store(total)
	s.observeQueue(ctx, q, total)
	if total == 0 {
		return nil
	}
	// Each pass starts at most one job per tenant, least served first.
	cursor := map[string]uint64{}
	for progress := true; progress; {
		progress = false
		for _, tenant := range q.order(tenants) {
			if len(q.sem) == cap(q.sem) {
				return nil // every worker busy: the next round goes on
			}
			started, full, err := s.admitNext(ctx, q, tenant, cursor)
			if err != nil {
				return err
			}
			if full {
				return nil // no slot: the next round, once one is free
			}
			progress = progress || started
		}
	}
	return nil
}

// observeQueue reports the queue's length and the age of its oldest
// ticket, at most once a second.
func (s *Service) observeQueue(ctx context.Context, q *queue, total int64) {
	if s.cfg.Metrics.Queue == nil {
		return
	}
	now := s.cfg.Now()
	if now.Sub(q.observed) < time.Second {
		return
	}
	q.observed = now
	var oldest time.Duration
	if total > 0 {
		m, err := s.waiting.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(s.ns.Waiting(q.name, "*")))
		if err == nil {
			oldest = max(now.Sub(m.Time), 0)
		}
	}
	s.cfg.Metrics.Queue(q.name, int(total), oldest)
}

// admitNext starts tenant's oldest waiting job that is not under way (from
// the ticket at cursor[tenant] on), and reports whether it did, and
// whether a level is full.
func (s *Service) admitNext(ctx context.Context, q *queue, tenant string, cursor map[string]uint64) (started, full bool, err error) {
	subject := s.ns.Waiting(q.name, tenant)
	for tries := 0; tries < cap(q.sem)+1; tries++ {
		m, err := s.waiting.GetMsg(ctx, max(cursor[tenant], 1), jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, false, nil
		}
		if err != nil {
			return false, false, err
		}
		cursor[tenant] = m.Sequence + 1
		t, err := events.DecodeTicket(m.Data)
		if err != nil {
			s.log.Error().Err(err).Uint64(logkey.TicketSeq, m.Sequence).Msg("dropping an unreadable admission ticket")
			_ = s.waiting.DeleteMsg(ctx, m.Sequence)
			continue
		}
		q.mu.Lock()
		skip := q.inflight[t.JobID] || s.cfg.Now().Before(q.notBefore[t.JobID])
		q.mu.Unlock()
		r := q.routes[t.Route]
		if skip || r == nil {
			continue // under way, resting, or another process's route
		}
		rec, err := s.jobs.Read(ctx, t.JobID)
		switch {
		case errors.Is(err, state.ErrNotFound):
			s.dropTicket(ctx, m.Sequence) // its job is gone
			continue
		case err != nil:
			return false, false, err
		case rec.Route != t.Route:
			s.dropTicket(ctx, m.Sequence)
			continue
		}
		if nextStep(rec.Job, rec.Route, rec.IntakeSeq) == stepSubmit && !rec.State.Terminal() && rec.CancelRequestedAt.IsZero() {
			held, full, err := s.gate[r.Name].Take(ctx, rec.ID, rec.App, rec.Slots)
			if err != nil {
				return false, false, err
			}
			if route.AppFull(full) {
				return false, false, nil // its app is full: other tenants go on
			}
			if full != "" {
				return false, true, nil
			}
			// Held now: the start records them with its attempt, and
			// takes none again.
			rec.Slots = held
		}
		q.mu.Lock()
		q.inflight[t.JobID] = true
		q.charge(tenant)
		q.mu.Unlock()
		q.sem <- struct{}{}
		seq := m.Sequence
		q.start(func(ctx context.Context) { s.admit(ctx, q, r, rec, seq) })
		return true, false, nil
	}
	return false, false, nil
}

// admit takes a waiting job from where it stands, as a redelivered
// submission would, and deletes its ticket once the job is submitted or
// ended; a job that must wait again rests for the delay asked.
func (s *Service) admit(ctx context.Context, q *queue, r *route.Route, rec jobs.Record, seq uint64) {
	defer func() {
		<-q.sem
		q.poke()
	}()
	in := intake{kind: events.KindSubmit, routeName: r.Name, route: r, seq: rec.IntakeSeq, attempt: uint64(rec.SubmitAttempts) + 1, queued: true}
	out, result := s.exclusively(rec.ID, func() (events.Outcome, string) {
		return s.drive(ctx, in, decided(rec), in.logger(s.log, rec.ID))
	})
	if s.cfg.Metrics.Submission != nil && result != "waiting" {
		s.cfg.Metrics.Submission(r.Name, events.KindSubmit, result)
	}
	// The ticket goes before the job stops being under way: else the
	// admission loop could pick it again in between, start the job a
	// second time (which would find it moved on) and charge its tenant
	// twice.
	if !out.IsLater() {
		s.dropTicket(ctx, seq)
	}
	q.mu.Lock()
	delete(q.inflight, rec.ID)
	if out.IsLater() {
		q.notBefore[rec.ID] = s.cfg.Now().Add(out.Delay())
	} else {
		delete(q.notBefore, rec.ID)
	}
	q.mu.Unlock()
}

// dropTicket deletes a ticket whose job needs no more admission.
func (s *Service) dropTicket(ctx context.Context, seq uint64) {
	if err := s.waiting.DeleteMsg(context.WithoutCancel(ctx), seq); err != nil && !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		s.log.Warn().Err(err).Uint64(logkey.TicketSeq, seq).Msg("deleting an admission ticket failed; the queue drops it when it comes up again")
	}
}

// sweepQueue ends the waiting jobs that need no slot to end — their
// deadline passed (they expire without a create), or they ended meanwhile
// — wherever they are in the queue, and drops their tickets; the
// admission loop only reaches a tenant's oldest. It returns how many it
// dropped.
func (s *Service) sweepQueue(ctx context.Context, q *queue) (int, error) {
	c, err := s.waiting.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.ns.Waiting(q.name, "*")}})
	if err != nil {
		return 0, err
	}
	dropped := 0
	for {
		// No wait: the batch ends with what the queue holds, so every
		// batch is read to its end and leaves no pull request behind.
		batch, err := c.FetchNoWait(256)
		if err != nil {
			return dropped, err
		}
		n, last := 0, false
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if s.sweepTicket(ctx, q, m.Data(), md.Sequence.Stream) {
				dropped++
			}
			last = md.NumPending == 0
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return dropped, err
		}
		if n == 0 || last {
			return dropped, nil
		}
	}
}

// sweepTicket drops a ticket whose job has ended or is gone, and expires
// a waiting job past its deadline; it reports whether it dropped it.
func (s *Service) sweepTicket(ctx context.Context, q *queue, data []byte, seq uint64) bool {
	t, err := events.DecodeTicket(data)
	if err != nil {
		s.dropTicket(ctx, seq)
		return true
	}
	if q.routes[t.Route] == nil {
		return false // another process's route
	}
	q.mu.Lock()
	busy := q.inflight[t.JobID]
	q.mu.Unlock()
	if busy {
		return false
	}
	rec, err := s.jobs.Read(ctx, t.JobID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		s.dropTicket(ctx, seq)
		return true
	case err != nil:
		return false
	case rec.State.Terminal() || rec.RemoteID != "":
		s.dropTicket(ctx, seq)
		return true
	case rec.SubmitInDoubt || s.cfg.Now().Before(rec.Deadline):
		return false
	}
	obs := state.Observation{State: state.Expired, Reason: "the deadline passed while it waited for a running slot", Source: state.FromPollux, At: s.cfg.Now().UTC()}
	after, err := s.jobs.End(ctx, rec, obs, jobs.UnlessSubmitted)
	if err != nil || !after.State.Terminal() {
		return false
	}
	s.log.Info().Str(logkey.JobID, rec.ID).Str(logkey.Route, rec.Route).Str(logkey.WaitedFor, rec.WaitingFor).Msg("expired while it waited; not submitted")
	if s.cfg.Metrics.Submission != nil {
		s.cfg.Metrics.Submission(rec.Route, events.KindSubmit, "expired")
	}
	s.dropTicket(ctx, seq)
	return true
}
