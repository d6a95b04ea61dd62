package jobs

import (
	"crypto/sha256"
	"encoding/hex"
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
