package census

// SetWalkBudget sets the events one take's walk reads per route, and
// returns the function that restores it. Only a test that does not run in
// parallel may call it.
func SetWalkBudget(n int) (restore func()) {
	was := walkBudget
	walkBudget = n
	return func() { walkBudget = was }
}
