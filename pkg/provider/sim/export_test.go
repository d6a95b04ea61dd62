package sim

// SetFaults replaces the server's faults (with defaults filled), so a test
// can start or stop injecting faults mid-run.
func SetFaults(s *Server, f Faults) {
	f = Config{Faults: f}.withDefaults().Faults
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Faults = f
}
