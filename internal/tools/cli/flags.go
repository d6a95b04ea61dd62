package cli

import (
	"fmt"
	"time"
)

// positive refuses a zero or negative value of a numeric flag whose zero
// would otherwise silently mean the flag's default (the Config structs
// take zero as "the default").
func positive[T int | int64 | uint64 | float64 | time.Duration](flag string, v T) error {
	if v <= 0 {
		return fmt.Errorf("--%s: must be greater than 0 (got %v)", flag, v)
	}
	return nil
}
