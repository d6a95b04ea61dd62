package bench

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cluster repeats the cycle measurement on a three-node cluster of
// nats-server processes with every stream, bucket and consumer replicated
// three times: what a cluster costs per check.
func (r *runner) cluster(ctx context.Context) error {
	return r.withServer(ctx, true, func(s *server, nc *nats.Conn, js jetstream.JetStream) error {
		return r.cycleRows(ctx, "cluster R3", s, nc, js, 3, false)
	})
}
