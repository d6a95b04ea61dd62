package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/state"
)

// The remote index: for routes whose provider calls one webhook endpoint
// for the whole account (provider.Info.WebhooksByRemoteID), a delivery
// names the remote job only, and the webhook receiver finds Pollux's job
// here. Ingest writes an entry once the provider's acceptance (or a track
// request) gave the job its remote id. Entries live in the deliveries
// bucket, under "rid.<route>.<hash of the remote id>" (three tokens: no
// delivery key has them), for its retry horizon (the webhook duplicate
// window): as long as a provider retries a delivery.

// remoteKey is the index key of a route's remote id.
func remoteKey(route, remoteID string) string {
	sum := sha256.Sum256([]byte(remoteID))
	return "rid." + route + "." + hex.EncodeToString(sum[:16])
}

// IndexRemote records that the route's remote job remoteID is job id.
func (o *Owner) IndexRemote(ctx context.Context, route, remoteID, id string) error {
	_, err := o.res.Deliveries.Put(ctx, remoteKey(route, remoteID), []byte(id))
	return err
}

// ByRemote returns the id of the route's job whose remote id is remoteID;
// state.ErrNotFound when the index has none (not yet: the create's answer
// is being recorded; or no longer).
func (o *Owner) ByRemote(ctx context.Context, route, remoteID string) (string, error) {
	e, err := o.res.Deliveries.Get(ctx, remoteKey(route, remoteID))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return "", state.ErrNotFound
	case err != nil:
		return "", err
	}
	return string(e.Value()), nil
}
