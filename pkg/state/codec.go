package state

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Decode parses a stored job record and checks that it names a job in a
// valid state.
func Decode(b []byte) (*Job, error) {
	var j Job
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("decode job record: %w", err)
	}
	if j.ID == "" {
		return nil, errors.New("decode job record: no id")
	}
	if !j.State.Valid() {
		return nil, fmt.Errorf("decode job record %s: state %q: %w", j.ID, j.State, ErrInvalidState)
	}
	return &j, nil
}
