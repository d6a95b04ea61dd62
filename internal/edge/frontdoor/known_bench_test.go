package frontdoor

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/pollux-dev/pollux/pkg/state"
)

// BenchmarkRemember is what remembering a face's read costs (every read
// a face makes), and the heap a full set of DefaultLastKnown remembered
// jobs holds, a job each of the shape the OpenAI face makes (its metadata
// with a 200-byte prompt, an output URL).
//
//	go test -run '^$' -bench Remember ./internal/edge/frontdoor/
func BenchmarkRemember(b *testing.B) {
	job := func(i int) *state.Job {
		p := 0.5
		return &state.Job{ID: fmt.Sprintf("video_%032x", i), Route: "sim", Model: "sora-2", State: state.Running, RemoteID: fmt.Sprintf("r%024x", i),
			Progress: &p, CreatedAt: time.Now(), NextCheckAt: time.Now(), Input: make([]byte, 2048),
			Metadata: map[string]string{"face": "openai", "openai_model": "sora-2", "openai_seconds": "8", "openai_size": "1280x720",
				"openai_prompt": string(make([]byte, 200))},
			Outputs: []string{"https://provider.example/outputs/" + fmt.Sprintf("%032x", i) + "/video.mp4"}}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	k := newKnown(DefaultLastKnown)
	for i := range DefaultLastKnown {
		k.remember(job(i)) // the record read goes; what is remembered stays
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / DefaultLastKnown
	again := job(7)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		again.ID = k.order.Back().Value.(*state.Job).ID // the least recently read: moved to the front
		k.remember(again)
	}
	b.ReportMetric(heap, "heap-B/job")
	runtime.KeepAlive(k)
}
