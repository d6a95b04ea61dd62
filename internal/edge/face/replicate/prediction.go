package replicate

import (
	"context"
	"encoding/base32"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
)

// prediction is Replicate's prediction object (faceshape.Prediction, its
// one owner: the webhooks carry the same).
type prediction = faceshape.Prediction

// Replicate's prediction statuses the face answers besides the record's.
const statusStarting = faceshape.StatusStarting

// Metadata keys a create writes on its job besides face.MetaFace.
const (
	metaModel   = faceshape.MetaReplicateModel
	metaVersion = faceshape.MetaReplicateVersion
)

// predictionOf is job j as a prediction (faceshape.PredictionOf).
var predictionOf = faceshape.PredictionOf

// idEncoding writes ids as Replicate's look: lowercase base32.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID is a create's prediction id: 26 characters of lowercase base32
// (128 bits), derived from the route and the create's Idempotency-Key
// when it has one.
func newID(ctx context.Context, route, key string) string {
	return idEncoding.EncodeToString(face.IDBytes(ctx, face.Replicate, route, key, 16))
}
