package bench

import (
	"context"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cluster repeats the cycle measurement on a three-node cluster of
// nats-server processes with every stream, bucket and consumer replicated
// three times: what a cluster costs per check; and the capacity run of
// the smallest size, its checks spread over Partitions partitions, each node's
// CPU and memory reported.
func (r *runner) cluster(ctx context.Context) error {
	err := r.withServer(ctx, true, func(s *server, nc *nats.Conn, js jetstream.JetStream) error {
		return r.cycleRows(ctx, "cluster R3", s, nc, js, 3, false)
	})
	if err != nil {
		return err
	}
	return r.capacityRun(ctx, capacityCase{n: slices.Min(r.cfg.Sizes), parts: r.cfg.Partitions, replicas: 3})
}
