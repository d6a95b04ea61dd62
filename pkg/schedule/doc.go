// Package schedule decides when to poll a job next. It is pure: no I/O, no
// NATS, no clock or randomness of its own (both are inputs), and it imports
// nothing of Pollux's.
//
// # Learned schedules
//
// Pollux learns how long each route's model takes (a Dist: a decaying
// log-spaced histogram, kept in the pollux-stats bucket) and polls where
// completion is likely. Given the distribution of durations T and the
// route's PollCost — what one poll is worth in detection delay — the Plan
// is the set of poll times minimising
//
//	E[polls] + E[detection delay] / PollCost
//
// with every interval in [MinDelay, MaxDelay], MaxDelay being the
// notification delay the route tolerates. It is solved by dynamic
// programming (see Plan) and cached, so Next costs a map lookup. The plan
// answers for every elapsed time, and what it answers is optimal for the
// distribution conditioned on the job still running, so a job polled off
// the plan (by jitter, a hint or an error) continues optimally. A planned poll is
// jittered around the plan's time (±Jitter/2), not only later: a poll
// moved either way costs little, one always moved later stretches every
// gap and the tail of the detection delays with it.
//
// When the provider reports when a job started, a second distribution of
// run times (start to end) places the polls of a running job, and a queued
// job is planned as if it started now: nothing ends before it starts.
//
// A job ends one of two ways, and each is learned apart when the caller
// keeps them (LearnedFailed, FailedShare): it succeeds after a run
// (LearnedRun, the succeeded jobs' run times), or it does not — a
// rejection, a failure, a cancel by the provider — at a time from
// acceptance, with a learned chance. A queued or running job's end is the
// mixture of the two, the success conditioned on the run so far, the
// failure on the time since acceptance; while the failure part still
// weighs (a model's rejections seconds after acceptance, its failures
// minutes into a run), the next poll is that of the mixture's
// cost-optimal plan on the job's run clock — one plan for every job of the
// model that waited as long for its start, to a quarter octave, cached
// like any — and once the job is past the failure times the run's plan
// applies. A long model pays for catching its rejections in its first
// seconds, and not in its queue or its run.
//
// # Cold start
//
// Until a distribution has MinSamples effective samples, the policy is
// the table of DESIGN.md, chosen by the job's expected duration (the
// submission's hint):
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
// # Signals
//
// Signals override both: consecutive errors back off exponentially; a job
// expecting a webhook is not polled until its expected completion (the
// learned 90th percentile, else the hint) plus a grace, and then only every
// Reconcile — or, once the route's webhook miss chance and lateness are
// learned, at the polls of a WebhookPlan: the same dynamic programme,
// where a poll is paid only while no webhook has come and the delay only
// when the webhook is missing, so reliable webhooks are reconciled late
// and seldom and unreliable ones sooner; a provider's estimate of the time left — an ETA, a progress
// fraction, a queue position with the rate the queue moves — places the
// next poll around it, trusted to ±25 %; a queued job is polled no faster than the table's
// slow end, or, learned, as if it started now; a provider's poll-after hint
// is a floor; no delay runs past the job's deadline, so the last check
// happens at it. MaxDelay is a hard cap on all of them — the table, the
// estimates, the hints — except the wait of a job expecting a webhook,
// which Reconcile bounds once its quiet period is over. A terminal job needs no decision: the caller stops.
//
// A progress fraction does better than an estimate once the route's run
// times are learned (LearnedRun, with the job's StartedAt). A report f
// after a run of r says the run time T has an elapsed share r/T of about
// f: in [f, f + s) for a provider rounding down to a step s, give or take
// 3 % for a share that does not follow the clock exactly. The step is not
// given: it is read from the report's granularity, the widest that fits
// (0.3 may be 10 %, 0.35 at most 5 %, 0.37 1 %, 1/3 a third, 0.1234 is
// exact), so a provider in steps of 1, 5 or 10 % or of n stages never
// gets a window narrower than its step. The learned run times weighted by
// how likely each makes the report, and restricted to T > r, are the
// job's remaining-time distribution, and the next poll is the first of its
// cost-optimal plan, jittered by ±Jitter — the same dynamic programme, on
// a small grid, solved at each decision in a few µs without allocating
// (the smoothed distribution is cached once per Dist). Each poll brings a
// fresh report, so the window narrows as the end nears. A progress of 0
// or 1, an ETA, a cold start (no LearnedRun ready), an unknown start or a
// report no learned run is consistent with keep the estimate r·(1 − f)/f.
//
// All durations of a Policy are in model time; Scale compresses them for
// demos and tests (Scale 20 makes a 60 s poll interval 3 s), while the job's
// timestamps, provider hints and learned durations are real time.
package schedule
