package index

import (
	"testing"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// Whatever is published on the events subjects, the index neither panics
// nor holds a job without an id: it applies an event or counts garbage.
func FuzzHandle(f *testing.F) {
	for _, seed := range []struct{ job, data string }{
		{"j", `{"v":1,"type":"queued","seq":1,"route":"r","job_id":"j","state":"queued","job":{"id":"j","route":"r","state":"queued","created_at":"2026-11-30T12:00:00Z","progress":0.5,"queue_position":3}}`},
		{"j", `{"v":1,"type":"rejected","route":"r","job_id":"j","rejection":{"kind":"submit","error":"no"}}`},
		{"", `{"v":1,"type":"route_paused","route":"r","by":"alice"}`},
		{"j", `{"v":1,"type":"succeeded","seq":2,"route":"r","job_id":"j","state":"succeeded","job":{"completed_at":"2026-11-30T12:00:00Z","detected_at":"2026-11-30T11:00:00Z","polls":-4}}`},
		{"j", `{"v":1,"type":"x","seq":1,"route":"r","job_id":"j","job":null}`},
		{"j", `not json`},
		{"j", `{"v":1,"type":"queued","seq":1,"route":"r","job_id":"j","time":"not a time"}`},
	} {
		f.Add(seed.job, []byte(seed.data))
	}
	_, _, js := natstest.JetStream(f)
	f.Fuzz(func(t *testing.T, job string, data []byte) {
		x, err := New(Config{MaxJobs: 2}, js, events.Default, nil)
		if err != nil {
			t.Fatal(err)
		}
		subject := events.Default.RouteEvent("r")
		if job != "" {
			subject += "." + job
		}
		for range 2 {
			x.handle(subject, data, 1)
		}
		n, _ := x.Size()
		if n == 0 && len(x.RouteEvents("r")) == 0 && x.Garbage() == 0 {
			// Neither applied nor counted: only an event older than
			// the one held can be, and there is none.
			t.Fatalf("%q on %s was neither applied nor counted", data, subject)
		}
		for _, it := range x.jobs {
			if it.e.ID == "" || it.e.ID != job {
				t.Fatalf("held a job %q from a message on %s", it.e.ID, subject)
			}
		}
		x.Activity("")
		if _, err := x.List(Query{}); err != nil {
			t.Fatal(err)
		}
	})
}
