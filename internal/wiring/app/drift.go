package app

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/learn"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// driftTold says a change of a model's drift: a log line, and the route's
// model_drift or model_drift_ended event (its message id the stats
// bucket's revision, so a retried publish is stored once). Called from the
// learned durations' flushing goroutine: it waits at most 5 s on NATS.
func driftTold(js jetstream.JetStream, ns events.Namespace, log zerolog.Logger) func(learn.Drift) {
	return func(d learn.Drift) {
		typ, lvl := events.EventModelDrift, zerolog.WarnLevel
		if !d.Drifting {
			typ, lvl = events.EventModelDriftEnded, zerolog.InfoLevel
		}
		log.WithLevel(lvl).Str(logkey.Route, d.Route).Str(logkey.Model, d.Model).Str(logkey.ConfigKey, d.ConfigKey).
			Float64("ratio", d.Ratio).Msg(d.Sentence())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := route.Announce(ctx, js, ns, events.RouteEvent{Type: typ, Route: d.Route, By: "pollux", Reason: d.Sentence(),
			Drift: &events.Drift{Model: d.Model, ConfigKey: d.ConfigKey, Ratio: d.Ratio,
				LearnedP50: d.Learned.Seconds(), RecentP50: d.Recent.Seconds(), RecentJobs: d.RecentN}},
			jetstream.WithMsgID("drift:"+d.Route+":"+strconv.FormatUint(d.Rev, 10)))
		if err != nil {
			log.Warn().Err(err).Str(logkey.Route, d.Route).Str(logkey.Model, d.Model).Msg("the drift event was not recorded")
		}
	}
}
