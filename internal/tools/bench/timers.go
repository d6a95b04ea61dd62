package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// timerSizes are the timer counts compared.
var timerSizes = []int{100_000, 300_000}

// timerRate is how many timers fire per second in the timer comparison.
const timerRate = 5000

// timerWindow is how long firing is measured.
const timerWindow = 20 * time.Second

// timers compares JetStream's two ways to wake a job later, at
// timerSizes: a message nak'd with a delay (what the poller does for near
// polls: it waits ack-pending in its consumer) and a message schedule
// (Nats-Schedule @at, server 2.12+: it waits in the stream's scheduler and
// is then published to a target subject; what a parked check is). For
// each: server memory per waiting timer, server CPU while they wait (none
// due) and while they fire, and how late they fire.
func (r *runner) timers(ctx context.Context) error {
	for _, n := range timerSizes {
		for _, kind := range []string{"nak-delay", "schedule"} {
			err := r.withServer(ctx, false, func(s *server, _ *nats.Conn, js jetstream.JetStream) error {
				return r.timerRun(ctx, s, js, kind, n)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// timerRun arms n timers due from lead on, timerRate per second (whole
// seconds: a schedule's time has no fraction), and measures them.
func (r *runner) timerRun(ctx context.Context, s *server, js jetstream.JetStream, kind string, n int) error {
	label := fmt.Sprintf("%dk timers, %s", n/1000, kind)
	const name = "BENCH_TIMERS"
	cfg := jetstream.StreamConfig{Name: name, Subjects: []string{"bench.t.>"}, Retention: jetstream.WorkQueuePolicy}
	if kind == "schedule" {
		cfg.Retention = jetstream.LimitsPolicy // schedules and targets share the stream
		cfg.AllowMsgSchedules = true
	}
	st, err := js.CreateStream(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), name) }()
	before, err := s.usage()
	if err != nil {
		return err
	}
	lead := time.Duration(n/10_000)*time.Second + 15*time.Second
	base := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	due := func(i int) time.Time { return base.Add(time.Duration(i/timerRate) * time.Second) }
	body := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(due(i).UnixNano())) }
	late := &latencies{}
	fired := func(m jetstream.Msg) {
		if d := m.Data(); len(d) == 8 {
			late.add(time.Since(time.Unix(0, int64(binary.BigEndian.Uint64(d)))))
		}
	}

	r.progress("%s: arming, first due in %s", label, lead.Round(time.Second))
	t0 := time.Now()
	w := &pubWindow{js: js}
	var consumer jetstream.ConsumeContext
	switch kind {
	case "nak-delay":
		for i := range n {
			if err := w.publish(ctx, fmt.Sprintf("bench.t.%d", i), body(i)); err != nil {
				return err
			}
		}
		if err := w.flush(ctx); err != nil {
			return err
		}
		c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "timers", AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 30 * time.Second, MaxAckPending: -1, MaxDeliver: -1})
		if err != nil {
			return err
		}
		armed := make(chan struct{})
		var count int
		consumer, err = c.Consume(func(m jetstream.Msg) {
			md, err := m.Metadata()
			if err != nil {
				return
			}
			if md.NumDelivered == 1 {
				at := time.Unix(0, int64(binary.BigEndian.Uint64(m.Data())))
				_ = m.NakWithDelay(time.Until(at))
				if count++; count == n {
					close(armed)
				}
				return
			}
			fired(m)
			_ = m.Ack()
		}, jetstream.PullMaxMessages(1000))
		if err != nil {
			return err
		}
		select {
		case <-armed:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(base)):
			return fmt.Errorf("%s: arming outlasted the lead", label)
		}
	case "schedule":
		for i := range n {
			if err := w.publish(ctx, fmt.Sprintf("bench.t.sched.%d", i), body(i),
				jetstream.WithScheduleAt(due(i)), jetstream.WithScheduleTarget(fmt.Sprintf("bench.t.fire.%d", i))); err != nil {
				return err
			}
		}
		if err := w.flush(ctx); err != nil {
			return err
		}
		c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "timers", FilterSubject: "bench.t.fire.>",
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: -1, DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			return err
		}
		consumer, err = c.Consume(func(m jetstream.Msg) {
			fired(m)
			_ = m.Ack()
		}, jetstream.PullMaxMessages(1000))
		if err != nil {
			return err
		}
	}
	defer consumer.Stop()
	armRate := float64(n) / time.Since(t0).Seconds()

	// Waiting, none due: from a settled moment to just before the first.
	if err := sleep(ctx, max(0, time.Until(base)-6*time.Second)); err != nil {
		return err
	}
	w0, err := s.usage()
	if err != nil {
		return err
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	w1, err := s.usage()
	if err != nil {
		return err
	}
	if err := sleep(ctx, time.Until(base)); err != nil {
		return err
	}
	late.on.Store(true)
	f0, err := s.usage()
	if err != nil {
		return err
	}
	if err := sleep(ctx, timerWindow); err != nil {
		return err
	}
	late.on.Store(false)
	f1, err := s.usage()
	if err != nil {
		return err
	}
	q := late.quantiles(0.5, 0.99)
	idle := 100 * (w1.CPU - w0.CPU).Seconds() / 5
	busy := 100 * (f1.CPU - f0.CPU).Seconds() / timerWindow.Seconds()
	perTimer := float64(w1.RSS-before.RSS) / float64(n)
	r.progress("  armed %.0f/s, %.0f B/timer, CPU waiting %.0f%%, firing %.0f%%, late p50 %s p99 %s (%d fired)",
		armRate, perTimer, idle, busy, q[0], q[1], late.count())
	g := "timers"
	r.report.add(Row{Group: g, Name: label + ": armed per second", Value: armRate, Unit: "/s"})
	r.report.add(Row{Group: g, Name: label + ": server memory per waiting timer", Value: perTimer, Unit: "B"})
	r.report.add(Row{Group: g, Name: label + ": server CPU while waiting, none due", Value: idle, Unit: "% of a core"})
	r.report.add(Row{Group: g, Name: label + ": server CPU while firing", Value: busy, Unit: "% of a core",
		Note: fmt.Sprintf("%d/s due", timerRate)})
	r.report.add(Row{Group: g, Name: label + ": lateness p50", Value: ms(q[0]), Unit: "ms"})
	r.report.add(Row{Group: g, Name: label + ": lateness p99", Value: ms(q[1]), Unit: "ms", Note: fmt.Sprintf("%d fired", late.count())})
	return nil
}
