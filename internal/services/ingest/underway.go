package ingest

import (
	"sync"
	"time"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// underWay are the jobs this process is handling — a submission's
// delivery, or the admission queue's start of a waiting job. A process
// handles a job once at a time. A delivery that finds its job under way
// here comes back later instead: it is most often the same submission
// redelivered because its ack wait passed while NATS was away, and the
// handling under way may hold the provider's answer and be retrying its
// write. Taken for a create in doubt, it would be looked up, sent again,
// or — at a provider that can do neither — given up as lost while the
// provider runs it.
//
// Another process of the fleet cannot see this set: a redelivery there
// waits out the attempt's call and, when its own connection came back
// since the attempt, reconnectGrace past the reconnect (resolve,
// decide.go), then resolves the doubt; an answer recorded after a job was
// given up keeps its remote id (jobs.Intake.Submitted).
type underWay struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

// busyWait is how long a delivery whose job is under way in this process
// waits before it comes again.
const busyWait = 2 * time.Second

// take marks job id under way and reports true, unless it is already.
func (u *underWay) take(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.ids[id]; ok {
		return false
	}
	if u.ids == nil {
		u.ids = map[string]struct{}{}
	}
	u.ids[id] = struct{}{}
	return true
}

// done ends job id's handling.
func (u *underWay) done(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.ids, id)
}

// exclusively runs h for job id unless the job is under way in this
// process; then the delivery comes back after busyWait (jittered), as
// "busy".
func (s *Service) exclusively(id string, h func() (events.Outcome, string)) (events.Outcome, string) {
	if !s.underWay.take(id) {
		s.log.Debug().Str(logkey.JobID, id).Msg("the job is being handled in this process; its delivery comes back later")
		return events.Later(schedule.Jitter(busyWait, schedule.RetryJitter, s.rnd)), "busy"
	}
	defer s.underWay.done(id)
	return h()
}
