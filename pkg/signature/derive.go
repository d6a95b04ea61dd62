package signature

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
)

// falKeyLabel separates the keys DeriveFalKey makes from the secrets
// DeriveSecret makes, and from any other use of the server secret.
const falKeyLabel = "pollux fal webhook key v1\x00"

// deriveLabel separates the secrets DeriveSecret makes from any other use
// of the server secret.
const deriveLabel = "pollux webhook secret v1\x00"

// DeriveSecret is the Standard Webhooks secret of one caller (a token's
// name) under a server secret (see ParseSecret): 32 bytes of HMAC-SHA256
// keyed with the server secret over a fixed label and the name. Each
// caller so gets its own secret that no other caller can compute, and
// nothing per caller is stored; a new server secret gives every caller a
// new one (rotation), while deliveries signed under both the old and the
// new server secret stay verifiable with either caller secret.
func DeriveSecret(server []byte, name string) []byte {
	mac := hmac.New(sha256.New, server)
	_, _ = io.WriteString(mac, deriveLabel)
	_, _ = io.WriteString(mac, name)
	return mac.Sum(nil)
}

// FormatSecret writes a secret as Standard Webhooks shows one: "whsec_"
// and its padded standard base64 (what ParseSecret reads back).
func FormatSecret(key []byte) string {
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// DeriveFalKey is the Ed25519 key fal-shaped webhooks are signed with
// under a server secret (see ParseSecret): its seed is HMAC-SHA256 keyed
// with the server secret over a fixed label. Every process given the same
// server secret signs with the same key, with nothing stored or
// coordinated; a new server secret is a new key (rotation: JWKS lists the
// public keys of every secret still configured).
func DeriveFalKey(server []byte) ed25519.PrivateKey {
	mac := hmac.New(sha256.New, server)
	_, _ = io.WriteString(mac, falKeyLabel)
	return ed25519.NewKeyFromSeed(mac.Sum(nil))
}
