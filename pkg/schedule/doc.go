// Package schedule decides when to poll a job next. It is pure: no I/O, no
// NATS, no clock or randomness of its own (both are inputs), and it imports
// nothing of Pollux's.
//
// The cold-start policy is the table of DESIGN.md, chosen by the job's
// expected duration:
//
//	expected     first poll   later      use
//	< 30 s       2–4 s        5–8 s      preview
//	30–120 s     4–8 s        10–20 s    standard
//	2–10 min     10–20 s      30–60 s    long render
//	> 10 min     30–60 s      60–120 s   very long (extrapolated)
//	unknown      5 s          backoff    new model
//
// After the first poll the delay doubles with every poll that saw no change
// (base · 2^unchanged), within the row's "later" band while the job is
// younger than twice its expected duration and up to MaxDelay after that;
// any change resets it. Every delay is jittered by ±Jitter so a fleet does
// not poll in lockstep.
//
// Signals override the table: a provider's poll-after hint is a floor; a
// queued job is polled no faster than the row's slow end; consecutive
// errors back off exponentially; a job expecting a webhook is not polled
// until its expected completion plus a grace, and then only every Reconcile;
// no delay runs past the job's deadline, so the last check happens at it.
//
// All durations of a Policy are in model time; Scale compresses them for
// demos and tests (Scale 20 makes a 60 s poll interval 3 s), while the job's
// timestamps and provider hints are real time.
package schedule
