package e2etest

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Supervisor keeps a process running: restarted whenever it exits, until
// halted. Kill SIGKILLs the current one (it is then restarted).
type Supervisor struct {
	t      *testing.T
	name   string
	launch func() *Proc
	mu     sync.Mutex
	cur    *Proc
	stop   chan struct{}
	halt   func()
	done   chan struct{}
	starts int
}

// Supervise launches a process and keeps it running until the test ends.
// Every launch registers the process's cleanup (SIGTERM and wait), and
// then the supervisor's halt: cleanups run last-registered first, so the
// supervisor stops before any of its processes is stopped, and a process
// stopped by its cleanup is not restarted.
func Supervise(t *testing.T, name string, launch func() *Proc) *Supervisor {
	s := &Supervisor{t: t, name: name, stop: make(chan struct{}), done: make(chan struct{})}
	s.halt = sync.OnceFunc(func() { close(s.stop); <-s.done })
	s.launch = func() *Proc {
		p := launch()
		t.Cleanup(s.halt)
		return p
	}
	s.cur, s.starts = s.launch(), 1
	go func() {
		defer close(s.done)
		for {
			s.mu.Lock()
			cur := s.cur
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-cur.done:
			}
			select {
			case <-s.stop:
				return
			case <-time.After(time.Duration(100+rand.IntN(400)) * time.Millisecond):
			}
			s.mu.Lock()
			s.cur = s.launch()
			s.starts++
			s.mu.Unlock()
		}
	}()
	return s
}

// Kill SIGKILLs the process running now.
func (s *Supervisor) Kill() {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	_ = cur.Cmd.Process.Kill()
}

// Starts is how many times the process has been launched so far.
func (s *Supervisor) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// KillAtRandom SIGKILLs one of sups at random every every+[0, spread)
// until the returned stop is called, which returns the number of kills.
func KillAtRandom(sups []*Supervisor, rnd *rand.Rand, every, spread time.Duration) (stop func() int) {
	done := make(chan struct{})
	killed := make(chan int)
	go func() {
		k := 0
		defer func() { killed <- k }()
		for {
			select {
			case <-done:
				return
			case <-time.After(every + time.Duration(rnd.Int64N(int64(spread)))):
			}
			sups[rnd.IntN(len(sups))].Kill()
			k++
		}
	}()
	return func() int { close(done); return <-killed }
}
