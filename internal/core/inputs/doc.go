// Package inputs owns the input files apps upload through the faces: an
// image for image-to-video, a reference clip. The bytes stream into a
// JetStream Object Store bucket (events.Namespace.InputsBucket: no new
// server, it replicates with the cluster like the other buckets), each
// file kept for Config.TTL and bounded by Config.MaxFileBytes, and the
// files one owner (the front door's name of the calling token) keeps at
// once by Config.MaxOwnerBytes. A job's input names a file by reference
// (Ref, "pollux-input://<id>"), never by its bytes, so a submission stays
// small whatever the input.
//
// What it offers, by who asks:
//
//   - A face: Put (a stream in, never held whole), Get, List and Delete,
//     each for one owner — another owner's file is ErrNotFound, as an
//     unknown one; Issue and Redeem for an upload made in two steps (fal's
//     storage: a signed, expiring, single-use upload URL); Lookup, which
//     checks the references a create's input carries before it is
//     submitted.
//   - The ingest service, when it creates a job at its provider: Deliver
//     turns each reference of the input into what the route's provider
//     takes (delivery.go): a signed, expiring URL on the front door's
//     public base URL, or the bytes inline as a data URI.
//   - The front door: Open serves a signed URL to the provider.
//
// An interrupted upload leaves nothing a reference can name: the object
// store writes an object's meta (what Get finds) only after its last
// chunk, and purges the chunks of a put that fails; chunks a killed
// process left go with the bucket's TTL.
//
// Each file carries a random key of its own (in its metadata): a signed
// URL is an HMAC of the file's id and expiry under it, so any process of
// the fleet verifies a URL another made, with no shared secret to
// configure, and deleting the file revokes every URL to it.
package inputs
