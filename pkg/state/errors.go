package state

import "errors"

// Errors callers branch on.
var (
	// ErrNotFound: no job with that id.
	ErrNotFound = errors.New("job not found")
	// ErrExists: a job with that id already exists (Create).
	ErrExists = errors.New("job already exists")
	// ErrConflict: the job changed since it was read (Update on a stale
	// revision), or Mutate ran out of retries.
	ErrConflict = errors.New("job changed concurrently")
	// ErrTerminal: the job is in a terminal state, which absorbs.
	ErrTerminal = errors.New("job is terminal")
	// ErrRegress: the move would take the job backwards.
	ErrRegress = errors.New("state would move backwards")
	// ErrInvalidState: a value that is not a job state.
	ErrInvalidState = errors.New("not a job state")
	// ErrNoChange, returned by a Mutate function, skips the write.
	ErrNoChange = errors.New("no change")
)
