package veo

import "time"

// SetNow replaces the adapter's clock.
func (a *Adapter) SetNow(now func() time.Time) { a.now = now }

// ParseOperation exposes the operation decoder to the fuzz test.
var ParseOperation = parseOperation

// RequestBody exposes the input mapping to the tests.
var RequestBody = requestBody
