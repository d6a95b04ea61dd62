package frontdoor

import (
	"container/list"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// What the faces last read. A face's app polls its job until it ends,
// each poll a read of the job's record through the front door (facade.Job).
// While NATS is unavailable — restarting, failing over, out of reach —
// no record can be read, and a 503 after the request timeout is what an
// SDK gives up on after its few retries, although Pollux and the provider
// go on with the job. So the front door remembers the last record it read
// of each job a face asked about (known, bounded in jobs and in bytes a
// job), and a read that cannot be made now is answered at once, when the
// connection is known to be down, with a 503 carrying it (face.Outage):
// the face answers its app from it (face.Kit.Poll), never as ended from
// what may be stale.

// DefaultLastKnown is Config.LastKnown's default: about 37 MB of heap
// for as many jobs of the OpenAI face's shape, 1.9 KB each
// (BenchmarkRemember, which also times a remember: 2-4 µs on a loaded
// two-core machine, against a read of the record it follows).
const DefaultLastKnown = 20000

// maxKnownBytes bounds one remembered record (its strings, metadata,
// outputs, roughly as held in memory): a larger one is not remembered,
// and a read of it through an outage is the 503.
const maxKnownBytes = 8 << 10

// known is the last record read of each job a face asked about, the
// latest read first; at most max of them.
type known struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *state.Job, the most recently read first
	by    map[string]*list.Element
}

func newKnown(maxJobs int) *known {
	return &known{max: maxJobs, order: list.New(), by: map[string]*list.Element{}}
}

// remember keeps j (a record just read, which nobody changes) as job
// j.ID's last record, without what a face never shows; a record too
// large is forgotten instead.
func (k *known) remember(j *state.Job) {
	if k.max <= 0 {
		return
	}
	c := *j
	c.Input, c.ProviderRef, c.Outbox, c.Deliveries, c.Slots = nil, nil, nil, nil, nil
	c.ResubmittedAs, c.Trace, c.LastError, c.Late = nil, "", "", nil
	if c.Routing != nil {
		c.Routing = &state.Routing{Via: c.Routing.Via} // what a face sees it by
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.by[j.ID]; ok {
		k.order.Remove(e)
		delete(k.by, j.ID)
	}
	if knownSize(&c) > maxKnownBytes {
		return
	}
	k.by[j.ID] = k.order.PushFront(&c)
	for k.order.Len() > k.max {
		oldest := k.order.Back()
		k.order.Remove(oldest)
		delete(k.by, oldest.Value.(*state.Job).ID)
	}
}

// forget drops job id (its record is gone).
func (k *known) forget(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.by[id]; ok {
		k.order.Remove(e)
		delete(k.by, id)
	}
}

// last is a copy of job id's last record read (its maps and slices
// shared: not to be changed), nil when none is remembered.
func (k *known) last(id string) *state.Job {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.by[id]
	if !ok {
		return nil
	}
	c := *e.Value.(*state.Job)
	return &c
}

// knownSize is roughly what record j holds in memory beyond its fixed
// fields: its strings, metadata and outputs.
func knownSize(j *state.Job) int {
	n := len(j.ID) + len(j.Route) + len(j.Model) + len(j.ConfigKey) + len(j.RemoteID) + len(j.ProviderStatus) +
		len(j.Reason) + len(j.IdempotencyKey) + len(j.NotifyURL) + len(j.WaitingFor) + len(j.AttemptID) +
		len(j.CancelReason) + len(j.CancelRequestedBy) + len(j.SubmittedBy) + len(j.SubmitReason) + len(j.ResubmitOf)
	for k, v := range j.Metadata {
		n += len(k) + len(v) + 32
	}
	for _, o := range j.Outputs {
		n += len(o) + 16
	}
	if j.Custody != nil {
		for _, o := range j.Custody.Outputs {
			n += len(o.Status) + len(o.Object) + len(o.Digest) + len(o.ContentType) + len(o.Reason) + 64
		}
	}
	if j.Routing != nil {
		n += len(j.Routing.Via) + 64
	}
	return n
}

// readable says why job records cannot be read now, nil when they may
// be: the connection to NATS is known to be down, so a read would wait
// the request timeout for nothing.
func (s *Server) readable() error {
	if nc := s.js.Conn(); nc != nil && !nc.IsConnected() {
		return errNotConnected
	}
	return nil
}

// errNotConnected: the front door's connection to NATS is down.
var errNotConnected = errors.New("not connected to NATS")

// readJob reads job id's record for a face: remembered when found; when
// records cannot be read, the 503 that carries the last record read of
// it (outage). While the connection is down, a poll of a job read before
// (face.Polling) is that 503 at once — the face answers from the record
// — and any other read first waits for the connection, at most
// ConnectWait: a cancel, a result, a first read made during a restart of
// a few seconds is only slower.
func (s *Server) readJob(ctx context.Context, id string) (*state.Job, error) {
	if err := s.readable(); err != nil {
		if face.Polling(ctx) && s.known.last(id) != nil {
			return nil, s.outage(id, err)
		}
		if err := waitConnected(ctx, s.js.Conn(), time.Now().Add(s.cfg.ConnectWait)); err != nil {
			return nil, s.outage(id, errNotConnected)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	j, err := s.jobs.Get(ctx, id)
	switch {
	case err == nil:
		s.known.remember(j)
		return j, nil
	case errors.Is(err, state.ErrNotFound):
		s.known.forget(id)
		return nil, err
	case ctx.Err() != nil && ctx.Err() != context.DeadlineExceeded:
		return nil, err // the request is gone
	}
	return nil, s.outage(id, err)
}

// outage is the 503 a face's read of job id is answered with while
// records cannot be read (why: err), carrying the last record read of it
// (face.Outage), freshened by the jobs index: an entry newer than the
// record gives its state, progress, queue position and wait — unless it
// says the job ended, which the index, holding no outputs, cannot answer
// (the face answers what may be stale as not ended).
func (s *Server) outage(id string, err error) *face.Error {
	if errors.Is(err, errNotConnected) {
		s.log.Debug().Str(logkey.JobID, id).Msg("a face's read through a NATS outage: answered from what was last read")
	} else {
		s.log.Warn().Err(err).Str(logkey.JobID, id).Msg("reading a job's record for a face failed: answered from what was last read")
	}
	last := s.known.last(id)
	if x := s.cfg.Index; last != nil && x != nil && !last.State.Terminal() {
		if e, ok := x.Get(id); ok && e.Seq > last.EventSeq && !e.State.Terminal() && !e.Rejected {
			last.State, last.Progress, last.QueuePosition, last.WaitingFor = e.State, e.Progress, e.QueuePosition, e.WaitingFor
			last.UpdatedAt = e.UpdatedAt
		}
	}
	if s.cfg.Metrics.OutageRead != nil {
		s.cfg.Metrics.OutageRead(last != nil)
	}
	return &face.Error{Status: http.StatusServiceUnavailable, Code: string(CodeUnavailable), RetryAfter: time.Second,
		Message: "Pollux cannot read job records now (NATS is unavailable); retry later",
		Err:     &face.Outage{Last: last, Err: nilIfNotConnected(err)}}
}

func nilIfNotConnected(err error) error {
	if errors.Is(err, errNotConnected) {
		return nil
	}
	return err
}
