package custody_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// The deployment's NATS permissions (deploy/nats/accounts.conf) let the
// webhook processes run output custody — its streams, consumers, object
// store and job writes — and the front door's user (ingest) read a kept
// output: a job's outputs are kept, and read back, with each service's
// own user.
func TestDeployedPermissionsAllowCustody(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../../deploy/nats/accounts.conf")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "accounts.conf"), b, 0o600))
	conf := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, "listen: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\ninclude \"accounts.conf\"\n",
		filepath.Join(dir, "js")), 0o600))
	for _, u := range []string{"SYS", "INGEST", "POLLER", "WEBHOOK", "CLIENT", "ADMIN"} {
		t.Setenv("NATS_"+u+"_PASSWORD", strings.ToLower(u)) // natstest.ConnectAs's password: the user's name
	}
	srv := natstest.ServerWithConfig(t, conf)
	admin := natstest.ConnectAs(t, srv, "admin")
	_, err = events.Default.Setup(t.Context(), admin, events.Options{})
	require.NoError(t, err)
	hook := natstest.ConnectAs(t, srv, "webhook")
	hookRes, err := events.Default.Setup(t.Context(), hook, events.Options{})
	require.NoError(t, err, "the webhook user sets up its streams")

	r := newRigOn(t, hook, hookRes)
	r.run()
	remote, url := r.prediction("owner/model")
	r.finish("r", "job", remote, []string{url}, time.Now().Add(2*time.Hour))
	o := r.saved("job").Custody.Outputs[0]
	require.Equal(t, "saved", o.Status, o.Reason)

	// The admin sees the same object the webhook user wrote.
	obs, err := admin.ObjectStore(t.Context(), events.Default.OutputsBucket())
	require.NoError(t, err)
	info, err := obs.GetInfo(t.Context(), "job/0")
	require.NoError(t, err)
	require.Equal(t, o.Digest, info.Digest)
}
