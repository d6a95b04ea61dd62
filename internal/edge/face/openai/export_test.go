package openai

import (
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
)

// NewWaiting is New with a create's wait for its record set to d.
func NewWaiting(m face.Mount, p face.Pollux, d time.Duration) face.Face {
	f := New(m, p).(*Face)
	f.createWait = d
	return f
}
