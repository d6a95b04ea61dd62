// Package facetest is test support for Pollux's provider faces: Pollux, an
// in-memory face.Pollux that stands for the front door, so a face's tests
// drive its handler without NATS.
//
// A submission is checked as the front door checks it, then becomes a
// pending record at once (unless held back, as when ingest is slow); a
// record read shares nothing with the stored one; every change of a
// record wakes the waiters, as the jobs index does; a cancel is recorded
// and, when asked, ends the job.
// A test steers it with its knobs (Hold, FailSubmit, CancelEnds,
// KeepOutputs, Clock, Outage: NATS unavailable, the records as they stood
// when it began the last ones read),
// writes records with Put and Update, and reads what the face asked with
// Submissions, Cancels and Waits.
//
// Conformance is the suite every face's tests run with a Harness (its
// kind, its job ids, its verbs about one job): it holds the face to what
// every face promises, as pkg/provider/providertest does the adapters —
// a job the face may not see is answered, by every verb, exactly as an
// unknown id, and no verb cancels it; through an outage, a job that had
// ended is answered as before it, one under way is answered by the
// face's poll as before it, and anything else is the 503.
//
// Only tests import it (depguard's test-support-stays-in-tests rule).
package facetest
