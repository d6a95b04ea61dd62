package fal

import (
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
)

// SetNow replaces the adapter's clock.
func (a *Adapter) SetNow(now func() time.Time) { a.now = now }

// OnQueue exposes the queue-host check to the fuzz test.
func (a *Adapter) OnQueue(raw, id string) bool { return a.onQueue(raw, id) }

// ParseStatus exposes the status decoder to the fuzz test.
func ParseStatus(id string, b []byte) (provider.Status, error) {
	st, _, err := parseStatus(id, b)
	return st, err
}
