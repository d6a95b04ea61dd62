package metrics

// The hooks each service is handed: the front door's, ingest's, the
// poller's, the webhook service's, outbound webhooks' and output
// custody's, each feeding the collectors New defines.

import (
	"slices"
	"strconv"
	"time"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/services/custody"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/internal/services/notify"
	"github.com/pollux-dev/pollux/internal/services/poller"
	"github.com/pollux-dev/pollux/internal/services/webhook"
)

// FrontDoor returns the hooks that feed pollux_http_requests_total,
// pollux_http_request_duration_seconds, pollux_face_outage_reads_total
// and pollux_http_creates_unconfirmed_total.
func (m *Metrics) FrontDoor() frontdoor.Metrics {
	return frontdoor.Metrics{
		Request: func(handler, method string, code int, d time.Duration) {
			m.httpRequests.WithLabelValues(handler, method, strconv.Itoa(code)).Inc()
			m.httpDuration.WithLabelValues(handler, method).Observe(d.Seconds())
		},
		OutageRead:  func(known bool) { m.outageReads.WithLabelValues(strconv.FormatBool(known)).Inc() },
		Unconfirmed: func(route, outcome string) { m.unconfirmed.WithLabelValues(route, outcome).Inc() },
	}
}

// Gate returns the observer of the process's provider calls
// (route.GateConfig.Observe): a status call feeds
// pollux_status_call_seconds, the others (submit, find, cancel — ingest's,
// and the poller's cancels at a deadline) pollux_provider_call_seconds;
// a call held for want of a budget lease is observed as "budget_busy".
func (m *Metrics) Gate() func(route string, op route.Op, class string, d time.Duration) {
	return func(r string, op route.Op, class string, d time.Duration) {
		if op == route.OpStatus {
			m.statusCalls.WithLabelValues(r, class).Observe(d.Seconds())
			return
		}
		m.providerCalls.WithLabelValues(r, string(op), class).Observe(d.Seconds())
	}
}

// Ingest returns the hooks of the ingest service.
func (m *Metrics) Ingest() ingest.Metrics {
	m.serviceStarts(func(r string) {
		for _, op := range callOps {
			for _, class := range slices.Concat(callClasses, []string{"budget_busy"}) {
				m.providerCalls.WithLabelValues(r, op, class)
			}
		}
	})
	return ingest.Metrics{
		Submission: func(route, kind, outcome string) { m.submissions.WithLabelValues(route, kind, outcome).Inc() },
		Orphans:    m.orphansOf("intake"),
		Waiting:    func(level string) { m.slotWaits.WithLabelValues(level).Inc() },
		Repaired: func(level string, n int) {
			m.slotRepairs.WithLabelValues(level).Add(float64(n))
		},
		Queue: func(queue string, waiting int, oldest time.Duration) {
			m.queueWaiting.WithLabelValues(queue).Set(float64(waiting))
			m.queueOldest.WithLabelValues(queue).Set(oldest.Seconds())
		},
	}
}

// Poller returns the hooks of the poller service.
func (m *Metrics) Poller() poller.Metrics {
	m.serviceStarts(func(r string) {
		for _, class := range slices.Concat(callClasses, []string{"budget_busy"}) {
			m.statusCalls.WithLabelValues(r, class)
		}
		m.lateness.WithLabelValues(r)
		m.age.WithLabelValues(r)
		for _, o := range poller.DeadlineOutcomes {
			m.deadlineCancels.WithLabelValues(r, o)
		}
	})
	return poller.Metrics{
		Lateness: func(route string, d time.Duration) { m.lateness.WithLabelValues(route).Observe(max(d.Seconds(), 0)) },
		Age:      func(route string, d time.Duration) { m.age.WithLabelValues(route).Observe(max(d.Seconds(), 0)) },
		Orphans:  m.orphansOf("checks"),
		DeadlineCancel: func(route, outcome string) {
			m.deadlineCancels.WithLabelValues(route, outcome).Inc()
		},
	}
}

// Webhook returns the hooks of the webhook service.
func (m *Metrics) Webhook() webhook.Metrics {
	m.serviceStarts(func(r string) {
		for _, changed := range []bool{false, true} {
			m.webhooksApplied.WithLabelValues(r, strconv.FormatBool(changed))
		}
		for _, reason := range dropReasons {
			m.webhooksDropped.WithLabelValues(r, reason)
		}
		m.callbackHints.WithLabelValues(r)
	})
	return webhook.Metrics{
		Received: func(route string, status int, d time.Duration) {
			m.webhooks.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
		},
		Applied: func(route string, changed bool) {
			m.webhooksApplied.WithLabelValues(route, strconv.FormatBool(changed)).Inc()
		},
		Hinted:  func(route string) { m.callbackHints.WithLabelValues(route).Inc() },
		Dropped: func(route, reason string) { m.webhooksDropped.WithLabelValues(route, reason).Inc() },
		Orphans: m.orphansOf("webhooks"),
	}
}

// Notify returns the outbound webhooks' metrics, every endpoint's series
// at zero from the start.
func (m *Metrics) Notify(endpoints []string) notify.Metrics {
	for _, e := range endpoints {
		for _, o := range notify.Outcomes {
			m.notifyDelivered.WithLabelValues(e, o)
		}
		m.notifyOpen.WithLabelValues(e).Set(0)
	}
	return notify.Metrics{
		Delivery: func(endpoint, outcome string) { m.notifyDelivered.WithLabelValues(endpoint, outcome).Inc() },
		Call:     func(endpoint string, d time.Duration) { m.notifyCalls.WithLabelValues(endpoint).Observe(d.Seconds()) },
		Circuit: func(endpoint string, open bool) {
			v := 0.0
			if open {
				v = 1
			}
			m.notifyOpen.WithLabelValues(endpoint).Set(v)
		},
	}
}

// Custody returns output custody's metrics, the series of every route at
// zero from the start (routes lists them all, kept those that keep their
// outputs).
func (m *Metrics) Custody(routes []string, kept map[string]bool) custody.Metrics {
	for _, r := range routes {
		m.outputsExpiring.WithLabelValues(r, strconv.FormatBool(kept[r]))
		if kept[r] {
			for _, o := range custody.Outcomes {
				m.custodyOutputs.WithLabelValues(r, o)
			}
			m.custodyBytes.WithLabelValues(r)
		}
	}
	return custody.Metrics{
		Output: func(route, outcome string) { m.custodyOutputs.WithLabelValues(route, outcome).Inc() },
		Bytes:  func(route string, n int64) { m.custodyBytes.WithLabelValues(route).Add(float64(n)) },
		Expiring: func(route string, kept bool) {
			m.outputsExpiring.WithLabelValues(route, strconv.FormatBool(kept)).Inc()
		},
	}
}

// orphansOf counts the orphans removed from one stream.
func (m *Metrics) orphansOf(stream string) func(n int) {
	c := m.orphans.WithLabelValues(stream)
	return func(n int) { c.Add(float64(n)) }
}
