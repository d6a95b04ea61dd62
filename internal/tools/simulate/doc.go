// Package simulate is `pollux simulate`: it runs the real pkg/schedule
// policy on a virtual clock, next to the static pollers users pick instead,
// and measures how close each comes to the best possible schedule.
//
// # Jobs
//
// A job is accepted at Submit, queued for Queue seconds, then running until
// its terminal state Duration seconds after Submit. Jobs come from the
// built-in workloads (Workloads: lognormal of three spreads, bimodal, heavy
// tailed, a mid-run slowdown and a speed-up, early failures and failures
// at a random point of the run, a long queue, progress reported, webhooks
// lost at 2, 10 or 30%; each with a lognormal queue wait and Poisson
// arrivals; mixed, six models interleaved, as many jobs each as alone;
// and studio, fleet and fleet-250, six models each seen a few hundred
// times, with early rejections), from a CSV
// trace (ReadTrace, WriteTrace), or from the fleet's own finished jobs
// (ReadFleet: the jobs bucket read through its owner, internal/core/jobs; the
// jobs learn.Durations learns from, in submit order). A poll at t sees the
// job queued, running or terminal; the simulated provider reports a
// running job's start time, as Replicate does, and with
// Job.ProgressStep its completed share, in steps. A job with Job.Webhook
// is also resolved by its webhook, WebhookLate after its end, unless
// WebhookLost: then only a poll finds it; no poll is made after the
// webhook.
//
// # Strategies
//
//   - adaptive: schedule.Policy.Next as the poller calls it, learning each
//     model's total and run-time Dist online, in submit order, from the
//     completions it has detected by then — never from the future. It is
//     handed a fresh copy of the learned Dists every Config.Refresh (16)
//     completions of the model; refreshing after every completion changes
//     the scores by under 0.3% and takes several times longer. It is told
//     what the provider reported of a running job: its start, and its
//     progress where reported. For jobs expecting a webhook it learns the
//     webhooks' reliability as internal/core/learn does — the miss chance from
//     the jobs whose end a poll found first (not within max(2× the
//     lateness, 5 s) of it), the lateness from the deliveries — and passes
//     both to the policy (Job.WebhookMiss, WebhookLate).
//   - adaptive-fixed-quiet: adaptive without the webhooks' reliability, the
//     policy's fixed quiet period (learned 90th percentile + WebhookGrace,
//     then every Reconcile); Run adds it after adaptive when jobs expect
//     webhooks.
//   - seed-table: the same policy's cold start, never learning.
//   - fixed:<s>: one poll every s seconds (the SDKs: 0.5–1 s).
//   - google: 1 s ×1.5 up to 20 s, full jitter (uniform from 0).
//   - smithy: Smithy/AWS waiters, 2 s doubling to 120 s, uniform from 2 s.
//   - optimal: the Plan of the model's true distribution (every job's
//     duration in the run), without jitter or per-job signals: the best a
//     poller without per-job signals can do. For jobs expecting a webhook,
//     Policy.WebhookPlan of the true distribution, the true share of lost
//     webhooks and the true 90th percentile of the lateness.
//   - population: optimal's plan of the model's population instead of the
//     run's jobs — PopulationJobs other jobs of the same built-in workload
//     (Workload.Population, Config.Population): what a poller without
//     per-job signals that knew the model exactly would do. On a few
//     hundred jobs it stays well above the frontier, which knows the very
//     jobs it is scored on.
//
// Every strategy draws its randomness from a stream of its own per model
// (of the seed, the strategy and the model's name), and adaptive learns
// each model apart: a model's figures in a mix are those it has alone.
//
// seed-table and adaptive's cold start get the model's median duration as
// the submission's expected duration, an accurate hint. The policy's
// MinDelay and MaxDelay bound adaptive, seed-table and optimal alike; the
// SDK strategies keep their own settings, and each strategy's first poll
// comes after its first delay (an SDK's immediate poll at submission is not
// counted).
//
// # Scores
//
// Each model's jobs after the first Warmup are scored: polls per job (the
// one that saw the end included) and the detection delay from the terminal
// state to that poll. The optimal frontier of a model is the lower convex
// hull of the optimal plan's (mean delay, polls) across poll costs — two
// plans can be mixed to reach any point between two of its points — and a
// strategy's ratio is its polls per job over the frontier's at its mean
// delay. adaptive-matched is adaptive at the largest poll cost (bisected to
// 2%) whose mean and p95 delays are no worse than seed-table's.
//
// With Config.Sweep every strategy also runs across its knob (the poll
// cost, or a factor on every delay) for WritePlot.
//
// # What-if
//
// RunWhatIf prices a change of a route's poll settings (Change: poll_cost,
// min_delay, max_delay, jitter) on one history: adaptive runs twice, with
// the same seed, under the policy of today and under the changed one, and
// each model's and all jobs' polls per job and delays are compared.
package simulate
