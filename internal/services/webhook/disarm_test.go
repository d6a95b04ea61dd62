package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/webhook"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// serverConf is a NATS configuration with an admin and a webhook user; the
// webhook user may not delete check messages unless canDelete.
func serverConf(dir string, canDelete bool) string {
	deny := `, deny: ["$JS.API.STREAM.MSG.DELETE.POLLUX_CHECKS"]`
	if canDelete {
		deny = ""
	}
	return fmt.Sprintf(`
listen: "127.0.0.1:-1"
jetstream { store_dir: %q }
accounts {
  APP {
    jetstream: enabled
    users: [
      { user: admin, password: admin }
      { user: hook, password: hook, permissions: { publish: { allow: [">"] %s } } }
    ]
  }
}
`, filepath.Join(dir, "js"), deny)
}

// A terminal webhook whose check cannot be removed (the server refuses the
// delete) is applied once and retried until the check goes: here the
// webhook user is denied the delete, the job finishes but keeps its check,
// and once a configuration reload grants the delete the retry removes it.
func TestRemovalRetriedUntilTheCheckGoes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte(serverConf(dir, false)), 0o600))
	srv := natstest.ServerWithConfig(t, conf)
	connect := func(user string) jetstream.JetStream { return natstest.ConnectAs(t, srv, user) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := connect("admin")
	res, err := events.Default.Setup(ctx, admin, events.Options{})
	require.NoError(t, err)
	adminJobs := jobs.New(events.Default, admin, res, jobs.Config{})
	track(t, adminJobs, &state.Job{ID: "job-1", Route: "rep", RemoteID: "p1", State: state.Running, WebhookExpected: true,
		NextCheckAt: time.Now().Add(time.Hour)})
	check := func() uint64 {
		v, err := adminJobs.Check(ctx, "rep", "job-1")
		require.NoError(t, err)
		return v.Seq
	}
	require.NotZero(t, check())

	hook := connect("hook")
	hres, err := events.Default.Open(ctx, hook)
	require.NoError(t, err)
	probe, err := hres.Checks.GetLastMsgForSubject(ctx, events.Default.Check("rep", "job-1"))
	require.NoError(t, err)
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	err = hres.Checks.DeleteMsg(dctx, probe.Sequence)
	dcancel()
	require.Error(t, err, "the webhook user cannot delete checks yet")

	svc, err := webhook.New(webhook.Config{Routes: map[string]*route.Route{"rep": repRoute(t, config.Route{})}},
		hook, events.Default, hres, jobs.New(events.Default, hook, hres, jobs.Config{}).Webhooks())
	require.NoError(t, err)
	code, _, _ := do(t, signedRequest(t, serve(t, svc)+"/webhooks/rep?job=job-1", "msg_1", time.Now(), prediction))
	require.Equal(t, http.StatusOK, code)
	require.Eventually(t, func() bool {
		j, err := adminJobs.Get(ctx, "job-1")
		return err == nil && j.State == state.Succeeded
	}, 10*time.Second, 20*time.Millisecond, "the delivery is applied")
	require.NotZero(t, check(), "the check could not be removed")

	require.NoError(t, os.WriteFile(conf, []byte(serverConf(dir, true)), 0o600))
	require.NoError(t, srv.Reload())
	require.Eventually(t, func() bool { return check() == 0 }, 30*time.Second, 50*time.Millisecond,
		"a retry removes the check once the delete is allowed")
	j, err := adminJobs.Get(ctx, "job-1")
	require.NoError(t, err)
	require.Equal(t, 1, j.Webhooks, "applied once, however often it was retried")
}
