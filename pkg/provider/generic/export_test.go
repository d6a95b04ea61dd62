package generic

import (
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
)

// SetNow replaces the adapter's clock.
func (a *Adapter) SetNow(now func() time.Time) { a.now = now }

// ParseStatus maps a status answer as Status does, without the follow-up.
func (a *Adapter) ParseStatus(body []byte, id string) (provider.Status, error) {
	doc, err := decode(body)
	if err != nil {
		return provider.Status{}, err
	}
	return a.interpret(doc, id)
}
