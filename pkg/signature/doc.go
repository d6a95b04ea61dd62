// Package signature verifies webhook deliveries before anything parses them
// (and signs Pollux's own fal-shaped ones):
// Standard Webhooks v1 (HMAC-SHA256; Replicate, OpenAI, Gemini) with
// Verifier, fal.ai's Ed25519 signatures with FalVerifier, and Atlas
// Cloud's with AtlasVerifier. It owns the signing rules, the header
// parsing, the timestamp window and the JWKS key cache both Ed25519
// schemes share; it does not read bodies, deduplicate or answer HTTP. Callers pass
// the raw body exactly as received (bounded by the receiver) and map the
// sentinel errors to status codes (see the Err variables).
//
// # Standard Webhooks v1
//
// The signed content is webhook-id + "." + webhook-timestamp + "." + body,
// using the header strings as received. Verify enforces:
//
//   - webhook-id: 1 to 256 bytes of printable ASCII, no spaces and no '.'.
//     A '.' would make the content ambiguous: id "m", timestamp T1, body
//     "T2.{}" signs the same bytes as id "m.T1", timestamp T2, body "{}".
//   - webhook-timestamp: canonical decimal Unix seconds (1 to 12 digits, no
//     sign, no leading zero), so the raw string is the canonical one, and at
//     most Tolerance (5 min) from now either way; exactly 5 min passes.
//   - webhook-id and webhook-timestamp sent on more than one line: rejected.
//   - webhook-signature: space-separated "<version>,<base64>" entries from
//     all its lines (a producer may split them), at most 4 KiB and
//     MaxSignatures (8) entries in total. Only v1 entries count; v1a, v2 and
//     the rest are ignored. A delivery passes when any v1 entry equals, in
//     constant time (hmac.Equal), the canonical padded base64 signature
//     under any configured secret, so secrets can be rotated; any other
//     spelling of a signature just does not match.
//   - secrets: "whsec_" + canonical padded standard base64 of 24 to 64
//     bytes, checked by ParseSecret at startup.
//
// # fal.ai
//
// fal signs request_id + "\n" + user_id + "\n" + timestamp + "\n" +
// hex(sha256(body)) with Ed25519 (headers X-Fal-Webhook-Request-Id,
// -User-Id, -Timestamp, and -Signature in hex) and publishes its public keys
// as a JWKS. FalVerifier pins our user id, applies the same timestamp rules,
// and tries every cached key. The JWKS is fetched lazily, with the caller's
// context, at most 64 KiB, one fetch shared by concurrent callers, never more
// than once per MinRefresh, again when the keys are older than MaxStaleness
// or when no cached key verifies (key rotation). Entries that are not OKP
// Ed25519 keys of 32 bytes are skipped (ed25519.Verify panics on other key
// sizes). A failed fetch (an error status, garbage, no usable key) never
// replaces good keys, and without keys younger than MaxStaleness
// verification fails closed with ErrKeys. A JWKS URL is https, or http to
// a loopback host only (a Pollux on the same machine).
//
// The same scheme signs Pollux's own fal-shaped webhooks: SignFal sets the
// four headers over falMessage, the one definition of the signed message
// the verifier checks too; DeriveFalKey derives the Ed25519 key from a
// server secret, so every process of a fleet signs with the same key
// without coordination; JWKS writes the document that publishes the keys
// (each with a KeyID), which FalVerifier reads.
//
// # Atlas Cloud
//
// Atlas Cloud signs X-AtlasCloud-Webhook-Timestamp + "." + body with
// Ed25519 (X-AtlasCloud-Webhook-Signature-Ed25519, base64url) under the key
// X-AtlasCloud-Webhook-Key-Id names in its JWKS. AtlasVerifier uses the
// same key cache as FalVerifier, looking a key up by its id: an unknown id
// refreshes the keys, within the same MinRefresh bound, so forged key ids
// cannot make it fetch more often. Its Verified re-checks a delivery
// already accepted against the cached keys, whatever its age.
//
// # Why in-house
//
// The official Go library (github.com/standard-webhooks/standard-webhooks,
// only tag v0.0.1) accepts an empty secret, has no injectable clock and a
// fixed tolerance, re-formats the timestamp (so "+ts" and "0ts" verify),
// accepts "v1,<sig>,x" and reads only the first signature line; the Svix
// module is a whole API client. The scheme needs only crypto/hmac,
// crypto/sha256 and encoding/base64, so a small verifier on the standard
// library, tested against the published vectors and fuzzed against a
// reference HMAC, is the safer dependency. Neither provider library
// implements fal's scheme, and v1a (Ed25519 Standard Webhooks) is not sent by
// any provider we use, so it is not implemented.
package signature
