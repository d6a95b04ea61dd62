package state

// Completed reports whether s is a completion: a job its provider
// finished, succeeded or failed. A job canceled on request, expired at its
// deadline or lost by its provider ended without one: it counts among the
// jobs ended (and their polls), not among the completions, and has no
// completion time to detect.
func (s State) Completed() bool { return s == Succeeded || s == Failed }

// Tally counts ended jobs into the figures `pollux stats` and the console
// show, so that both say the same of the same jobs: completions
// (State.Completed), polls per completion and webhook coverage. Add a job
// once, when it ends; tallies add up with Merge.
type Tally struct {
	// Ended counts the jobs ended (any terminal state), Polls the status
	// calls they made in all their life.
	Ended, Polls int
	// Completions counts the ended jobs that are completions.
	Completions int
	// Expecting counts the completions of jobs that expected a webhook;
	// ByWebhook those of them a webhook told first, ByPoll those a poll
	// found first (a missing webhook).
	Expecting, ByWebhook, ByPoll int
}

// Add counts one ended job: its state, its polls, whether it expected a
// webhook and what told Pollux of its end. A state not terminal is not
// counted.
func (t *Tally) Add(s State, polls int, webhookExpected bool, by Source) {
	if !s.Terminal() {
		return
	}
	t.Ended++
	t.Polls += polls
	if !s.Completed() {
		return
	}
	t.Completions++
	if !webhookExpected {
		return
	}
	t.Expecting++
	switch by {
	case FromWebhook:
		t.ByWebhook++
	case FromPoll:
		t.ByPoll++
	}
}

// Merge adds o's counts to t.
func (t *Tally) Merge(o Tally) {
	t.Ended += o.Ended
	t.Polls += o.Polls
	t.Completions += o.Completions
	t.Expecting += o.Expecting
	t.ByWebhook += o.ByWebhook
	t.ByPoll += o.ByPoll
}

// PollsPerCompletion is the status calls of every ended job over the
// completions: what each job its provider finished cost in polls, the
// polls of the jobs that ended without one (canceled, expired, lost)
// included, for they were spent all the same (0 when none completed).
func (t Tally) PollsPerCompletion() float64 {
	if t.Completions == 0 {
		return 0
	}
	return float64(t.Polls) / float64(t.Completions)
}

// WebhookCoverage is the share of the completions expecting a webhook
// that a webhook told first (0 to 1; 0 when none expected one: a
// poll-only route has no coverage to speak of, see Expecting).
func (t Tally) WebhookCoverage() float64 {
	if t.Expecting == 0 {
		return 0
	}
	return float64(t.ByWebhook) / float64(t.Expecting)
}
