package atlas

import (
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
)

// SetNow replaces the adapter's clock.
func (a *Adapter) SetNow(now func() time.Time) { a.now = now }

// ParsePrediction exposes the status decoder to the fuzz test.
func ParsePrediction(id string, b []byte, keep time.Duration, now time.Time) (provider.Status, error) {
	return parsePrediction(id, b, keep, now)
}

// ParseSubmit exposes the submit decoder to the fuzz test.
func ParseSubmit(b []byte, now time.Time) (provider.Status, error) { return parseSubmit(b, now) }

// ReadDelivery exposes the webhook body decoder to the fuzz test.
func ReadDelivery(b []byte) (string, error) {
	id, _, _, err := readDelivery(b)
	return id, err
}
