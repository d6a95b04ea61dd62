package sim

// SetFaults replaces the server's faults (with defaults filled), so a test
// can start or stop injecting faults mid-run.
func SetFaults(s *Server, f Faults) {
	f = Config{Faults: f}.withDefaults().Faults
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Faults = f
}

// ActivePredictions returns how many predictions the server keeps as
// possibly running, so a test can see that ended ones are dropped.
func ActivePredictions(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}
