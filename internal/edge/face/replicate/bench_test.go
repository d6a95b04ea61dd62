package replicate_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/edge/face/replicate"
	"github.com/pollux-dev/pollux/pkg/state"
)

// BenchmarkGet is the face's own cost of a get — the lookup, the mapping
// and the answer — over an in-memory Pollux: what every SDK poll costs
// the front door besides reading the record.
func BenchmarkGet(b *testing.B) {
	p := facetest.New()
	now := time.Now()
	p.Put(&state.Job{ID: "abcdefghijklmnopqrstuvwxyz", Route: route, Model: "acme/video", State: state.Succeeded,
		CreatedAt: now.Add(-time.Minute), StartedAt: now.Add(-30 * time.Second), CompletedAt: now,
		Outputs: []string{"https://cdn.example/out.mp4"}, Metadata: map[string]string{face.MetaFace: string(face.Replicate)}})
	h := replicate.New(face.Mount{Kind: face.Replicate, Route: route, Prefix: face.Prefix(face.Replicate, route)}, p).Handler()
	req := httptest.NewRequest(http.MethodGet, "/v1/predictions/abcdefghijklmnopqrstuvwxyz", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
