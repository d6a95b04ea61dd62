package route

import "time"

// SetNow sets the mirror's clock.
func (p *Pauses) SetNow(now func() time.Time) { p.now = now }

// RoundUp is roundUp, for its test.
var RoundUp = roundUp
