package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// clientInbox is the inbox prefix the client user must connect with.
const clientInbox = "_INBOX_client"

// TestPermissions runs the fleet on a nats-server started from
// deploy/nats/single.conf with deploy/nats/accounts.conf, each service with
// its own user: jobs submitted and canceled by the least-privileged client
// user finish, a submission to an unserved route is rejected, and no service
// meets a single permissions violation on the way (budgets, webhooks, route
// pauses, learned durations, cancels and the census are all exercised). Then
// what a user has no business doing is refused: the client reading job
// records, sniffing the services' replies or publishing checks; the webhook
// user publishing intake; a service deleting a stream; and connections
// without (or with wrong) credentials.
func TestPermissions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	t.Parallel()
	bin := e2etest.Binaries(t)
	dir := t.TempDir()
	conf := singleConf(t, dir)

	natsPort := e2etest.FreePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	server := e2etest.Launch(t, "nats-server", e2etest.NATSPasswordEnv(), filepath.Join(bin, "nats-server"), "-c", conf,
		"-a", "127.0.0.1", "-p", strconv.Itoa(natsPort), "-m", strconv.Itoa(e2etest.FreePort(t)))

	const secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	simAddr := fmt.Sprintf("127.0.0.1:%d", e2etest.FreePort(t))
	simCfg := filepath.Join(dir, "sim.yaml")
	require.NoError(t, os.WriteFile(simCfg, []byte(`
time_scale: 50
seed: 9
webhook_secret: `+secret+`
default: {queue_median: 2s, run_median: 20s, run_sigma: 0.3, fail_rate: 0.1}
models:
  perm/long: {queue_median: 1s, run_median: 24h}
faults: {rate_limit_rate: 0.05, retry_after: 1s, webhook_missing_rate: 0.3}
`), 0o600))
	env := []string{"PERM_TOKEN=perm-token", "PERM_WEBHOOK_SECRET=" + secret}
	e2etest.Launch(t, "sim", env, filepath.Join(bin, "pollux"), "sim-provider", "--addr", simAddr, "--config", simCfg, "--token-env", "PERM_TOKEN")

	hookAddr := fmt.Sprintf("127.0.0.1:%d", e2etest.FreePort(t))
	// Sweeps every second: the orphan sweep's reads and deletes run under
	// the permissions too.
	route := fmt.Sprintf(`
streams: {sweep_interval: 1s}
routes:
  sim:
    kind: replicate
    base_url: http://%s
    token_env: PERM_TOKEN
    webhook_secret_env: PERM_WEBHOOK_SECRET
    webhook_url: http://%s/webhooks/sim
    budgets:
      submit: {concurrency: 2}
      status: {concurrency: 3}
    options: {idempotent: true}
`, simAddr, hookAddr)
	// Each service runs as its own user, named in its config
	// (nats.user + password_env) ...
	for _, name := range []string{"ingest", "poller", "webhook"} {
		cfg := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("nats: {user: %s, password_env: NATS_PASSWORD}\n%s", name, route)), 0o600))
		e2etest.Launch(t, name, append(env, "POLLUX_NATS_URL="+natsURL, "POLLUX_CONFIG="+cfg, "POLLUX_TIME_SCALE=50", "POLLUX_CENSUS_EVERY=1s",
			"POLLUX_METRICS_ADDR=", "POLLUX_WEBHOOK_ADDR="+hookAddr, "NATS_PASSWORD="+e2etest.NATSPasswords[name]),
			filepath.Join(bin, name))
	}
	// ... and a second poller with the user in the URL, as deploy/compose
	// and deploy/k8s run them.
	plain := filepath.Join(dir, "plain.yaml")
	require.NoError(t, os.WriteFile(plain, []byte(route), 0o600))
	e2etest.Launch(t, "poller-url", append(env, "POLLUX_CONFIG="+plain, "POLLUX_TIME_SCALE=50", "POLLUX_METRICS_ADDR=",
		fmt.Sprintf("POLLUX_NATS_URL=nats://poller:%s@127.0.0.1:%d", e2etest.NATSPasswords["poller"], natsPort)),
		filepath.Join(bin, "poller"))

	// The application: the client user, with its inbox prefix.
	nc := connectAs(t, natsURL, "client", nats.CustomInboxPrefix(clientInbox))
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	e2etest.WaitFor(t, "the events stream", 30*time.Second, func() bool {
		_, err := js.Stream(context.Background(), events.Default.EventsStream())
		return err == nil
	})
	log := e2etest.Follow(t, js, events.Default)
	live, err := nc.SubscribeSync(events.Default.Prefix() + ".events.>") // without JetStream
	require.NoError(t, err)

	const n = 30
	ids := map[string]bool{}
	submit := func(key, model string) string {
		msg, err := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: model, Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		_, err = js.Publish(context.Background(), events.Default.Submit("sim"), msg)
		require.NoError(t, err)
		id := events.KeyID("sim", key)
		ids[id] = true
		return id
	}
	for i := range n {
		submit(fmt.Sprintf("perm-%02d", i), "perm/model")
	}
	long := submit("perm-long", "perm/long")
	_, err = js.Publish(context.Background(), events.Default.Submit("nowhere"), []byte(`{"v":1,"model":"a/b","input":{}}`))
	require.NoError(t, err)

	// Cancel the job that would run for a day once it is running.
	e2etest.WaitFor(t, "the long job submitted", 30*time.Second, func() bool { return len(log.Jobs()[long]) > 0 })
	cancel, err := json.Marshal(events.Cancel{V: 1, ID: long, Reason: "permissions test"})
	require.NoError(t, err)
	_, err = js.Publish(context.Background(), events.Default.Cancel("sim"), cancel)
	require.NoError(t, err)

	e2etest.WaitFor(t, "every job terminal", 40*time.Second, func() bool { return len(log.Terminal()) == len(ids) })
	e2etest.WaitFor(t, "the unserved route's submission rejected", 20*time.Second, func() bool { return len(log.Rejections()) == 1 })
	for id := range ids {
		require.Len(t, log.Terminal()[id], 1, "job %s: one terminal event", id)
	}
	require.Equal(t, "canceled", string(log.Terminal()[long][0].State))
	require.Contains(t, log.Rejections()[0].Rejection.Error, "nowhere")
	ctx := context.Background()

	// What else a client may do: live events, the last event of a job, a
	// durable consumer with acks of its own, tracking a job.
	_, err = live.NextMsg(5 * time.Second)
	require.NoError(t, err, "live events reach a core subscription")
	evs, err := js.Stream(ctx, events.Default.EventsStream())
	require.NoError(t, err)
	last, err := evs.GetLastMsgForSubject(ctx, events.Default.Event("sim", long))
	require.NoError(t, err)
	ev, err := events.DecodeEvent(last.Data)
	require.NoError(t, err)
	require.Equal(t, "canceled", ev.Type)
	durable, err := evs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "perm-app", FilterSubject: events.Default.Event("sim", "*"), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	batch, err := durable.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for msg := range batch.Messages() {
		require.NoError(t, msg.DoubleAck(ctx))
	}
	require.NoError(t, batch.Error())
	info, err := durable.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.AckFloor.Consumer, "the event was acked")
	require.NoError(t, evs.DeleteConsumer(ctx, "perm-app"))
	track, err := json.Marshal(events.Track{V: 1, RemoteID: "elsewhere-1", Model: "perm/model"})
	require.NoError(t, err)
	_, err = js.Publish(ctx, events.Default.Track("sim"), track)
	require.NoError(t, err)

	// What the services do only when the configuration changes or in rare
	// paths, run with each service's own user through the same code:
	// stream, bucket and consumer limits reconciled, budgets resized (leases
	// added and removed), a missing job confirmed with the bucket's leader,
	// a check armed and removed.
	for i, user := range []string{"ingest", "poller", "webhook"} {
		ujs, err := jetstream.New(connectAs(t, natsURL, user))
		require.NoError(t, err)
		hours := time.Duration(48+i) * time.Hour
		o := events.Options{EventsMaxAge: hours, JobsTTL: hours, WebhookDuplicates: hours, IntakeMaxBytes: int64(2+i) << 30}
		res, err := events.Default.Setup(ctx, ujs, o)
		require.NoError(t, err, "%s: streams and buckets updated", user)
		consumer := map[string]struct {
			s   jetstream.Stream
			cfg jetstream.ConsumerConfig
		}{
			"ingest":  {res.Intake, events.Default.IngestConsumerConfig("sim", o)},
			"poller":  {res.Checks, events.Default.PollerConsumerConfig("sim", 0, 1, o)},
			"webhook": {res.Webhooks, events.Default.WebhookConsumerConfig(o)},
		}[user]
		consumer.cfg.AckWait += time.Second
		_, err = events.EnsureConsumer(ctx, consumer.s, consumer.cfg)
		require.NoError(t, err, "%s: its consumer updated", user)
		resize := map[string][]budgetSize{
			"ingest": {{events.SlotSubmit, 1}, {events.SlotStatus, 4}},
			"poller": {{events.SlotStatus, 2}},
		}[user]
		for _, b := range resize {
			_, err := budget.Ensure(ctx, ujs, events.Default, res.Slots, "sim", b.kind, budget.Limit{Concurrency: b.n}, o)
			require.NoError(t, err, "%s: the %s budget resized to %d", user, b.kind, b.n)
		}
		owner := jobs.New(events.Default, ujs, res, jobs.Config{})
		_, err = owner.Get(ctx, "no-such-job-"+user)
		require.ErrorIs(t, err, state.ErrNotFound, "%s: a job no replica has is confirmed missing by the leader", user)
		probe := &state.Job{ID: "probe-" + user, Route: "unserved", RemoteID: "r-probe", State: state.Running,
			WebhookExpected: true, CreatedAt: time.Now().UTC(), NextCheckAt: time.Now().Add(time.Hour)}
		probe.Record(events.EventSubmitted, probe.CreatedAt)
		rec, _, err := owner.Intake().Accept(ctx, probe)
		require.NoError(t, err, "%s tracks a job: its record, its event, its check", user)
		require.NoError(t, owner.Intake().Resume(ctx, rec), "%s resumes it: reads its latest event", user)
		_, err = owner.Webhooks().Webhook(ctx, jobs.Notice{Route: "unserved", JobID: probe.ID, DeliveryID: "probe", RemoteID: "r-probe",
			Obs: state.Observation{State: state.Succeeded}})
		require.NoError(t, err, "%s ends it and removes its check", user)
	}

	// Not one violation by a service or the client in all of that.
	violations := e2etest.ViolationLine
	seen := violations.FindAllString(e2etest.ReadLog(t, server), -1)
	require.Empty(t, seen, "permissions violations")

	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 2*time.Second) }
	refused := func(user, what string) {
		t.Helper()
		e2etest.WaitFor(t, fmt.Sprintf("the server to log %s refused %s", user, what), 5*time.Second, func() bool {
			for _, l := range violations.FindAllString(e2etest.ReadLog(t, server), -1) {
				if strings.Contains(l, `"POLLUX/user:`+user+`"`) && strings.Contains(l, fmt.Sprintf("%q", what)) {
					return true
				}
			}
			return false
		})
	}
	jobKey := fmt.Sprintf("%s.$KV.%s.%s", events.Default.JobsBucket(), events.Default.JobsBucket(), long)

	t.Run("client cannot read job records", func(t *testing.T) {
		c, cancel := short()
		defer cancel()
		_, err := js.KeyValue(c, events.Default.JobsBucket())
		require.Error(t, err)
		refused("client", "$JS.API.STREAM.INFO.KV_"+events.Default.JobsBucket())

		_, err = nc.Request("$JS.API.DIRECT.GET.KV_"+jobKey, nil, time.Second)
		require.Error(t, err)
		refused("client", "$JS.API.DIRECT.GET.KV_"+jobKey)

		_, err = js.OrderedConsumer(c, "KV_"+events.Default.JobsBucket(), jetstream.OrderedConsumerConfig{})
		require.Error(t, err)
	})

	t.Run("client cannot create or change streams", func(t *testing.T) {
		c, cancel := short()
		defer cancel()
		_, err := js.CreateStream(c, jetstream.StreamConfig{Name: "PERM_OWN", Subjects: []string{"perm.own"}})
		require.Error(t, err)
		refused("client", "$JS.API.STREAM.CREATE.PERM_OWN")
	})

	t.Run("client cannot read the services' replies", func(t *testing.T) {
		sub, err := nc.SubscribeSync("_INBOX.>")
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		_, err = sub.NextMsg(2 * time.Second)
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		refused("client", "_INBOX.>")
	})

	t.Run("client cannot publish checks", func(t *testing.T) {
		subject := events.Default.Check("sim", "forged")
		c, cancel := short()
		defer cancel()
		_, err := js.Publish(c, subject, []byte(`{}`))
		require.Error(t, err)
		refused("client", subject)

		admin := connectAs(t, natsURL, "admin")
		ajs, err := jetstream.New(admin)
		require.NoError(t, err)
		checks, err := ajs.Stream(ctx, events.Default.ChecksStream())
		require.NoError(t, err)
		_, err = checks.GetLastMsgForSubject(ctx, subject)
		require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "nothing was stored")
	})

	t.Run("webhook cannot publish intake", func(t *testing.T) {
		wnc := connectAs(t, natsURL, "webhook")
		wjs, err := jetstream.New(wnc)
		require.NoError(t, err)
		subject := events.Default.Submit("sim")
		c, cancel := short()
		defer cancel()
		_, err = wjs.Publish(c, subject, []byte(`{"v":1,"model":"a/b","input":{}}`))
		require.Error(t, err)
		refused("webhook", subject)
	})

	t.Run("no service can delete a stream", func(t *testing.T) {
		inc := connectAs(t, natsURL, "ingest")
		ijs, err := jetstream.New(inc)
		require.NoError(t, err)
		c, cancel := short()
		defer cancel()
		require.Error(t, ijs.DeleteStream(c, events.Default.EventsStream()))
		refused("ingest", "$JS.API.STREAM.DELETE."+events.Default.EventsStream())
		_, err = js.Stream(ctx, events.Default.EventsStream())
		require.NoError(t, err, "the events stream is still there")
	})

	t.Run("a connection without credentials is refused", func(t *testing.T) {
		_, err := nats.Connect(natsURL)
		require.ErrorIs(t, err, nats.ErrAuthorization)
		_, err = nats.Connect(natsURL, nats.UserInfo("client", "wrong"))
		require.ErrorIs(t, err, nats.ErrAuthorization)
	})
}

// singleConf writes a server config into dir that is deploy/nats/single.conf
// with its store directory in dir: the server refuses -sd when the file sets
// store_dir, and a jetstream block given after the include replaces the
// file's whole block.
func singleConf(t *testing.T, dir string) string {
	t.Helper()
	single := filepath.Join(e2etest.DeployDir(t), "nats", "single.conf")
	rel, err := filepath.Rel(dir, single) // includes are relative to the including file
	require.NoError(t, err)
	conf := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf("include %q\njetstream {store_dir: %q, max_file_store: 64GB}\n",
		rel, filepath.Join(dir, "js"))), 0o600))
	return conf
}

// budgetSize is a budget kind and its number of leases.
type budgetSize struct {
	kind string
	n    int
}

// connectAs connects as one of deploy/nats/accounts.conf's users.
func connectAs(t *testing.T, url, user string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append(opts, nats.UserInfo(user, e2etest.NATSPasswords[user]), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.PermissionErrOnSubscribe(true))
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	e2etest.WaitFor(t, "connected as "+user, 20*time.Second, nc.IsConnected)
	return nc
}
