package sim

// Stats are the sim's counters: what clients did to it and what it did.
// Counters count since New or the last POST /_sim/reset-stats;
// PredictionsByStatus, Predictions and Lost describe the predictions held.
type Stats struct {
	// Seed is the seed in use (Config.Seed, or the one drawn from the clock).
	Seed int64 `json:"seed"`
	// Predictions is the number of predictions held.
	Predictions int `json:"predictions"`
	// Creates counts create requests that made or returned a prediction.
	Creates int `json:"creates"`
	// DuplicateCreates counts creates whose Idempotency-Key had been seen
	// before (whether or not Faults.NotIdempotent is set).
	DuplicateCreates int `json:"duplicate_creates"`
	// MaxCreatesPerKey is the most creates seen for one Idempotency-Key.
	MaxCreatesPerKey int `json:"max_creates_per_key"`
	// IdempotencyKeys counts distinct Idempotency-Keys of creates.
	IdempotencyKeys int `json:"idempotency_keys"`
	// StatusCalls counts GET /v1/predictions/{id} calls, whatever the answer
	// (401s excepted).
	StatusCalls int `json:"status_calls"`
	// CancelCalls counts POST /v1/predictions/{id}/cancel calls, whatever
	// the answer (401s excepted).
	CancelCalls int `json:"cancel_calls"`
	// ListCalls counts GET /v1/predictions calls, whatever the answer
	// (401s excepted).
	ListCalls int `json:"list_calls"`
	// PeakConcurrentStatus is the most GET prediction calls in flight at once.
	PeakConcurrentStatus int `json:"peak_concurrent_status"`
	// PeakConcurrentCreates is the most create calls in flight at once.
	PeakConcurrentCreates int `json:"peak_concurrent_creates"`
	// PeakRunning is the most predictions non-terminal ("starting" or
	// "processing", not lost) at the same moment, taken at each create:
	// what Limits.Running caps, and what a client's own concurrency limit
	// should keep at or below its figure. After a reset it starts from
	// Running.
	PeakRunning int `json:"peak_running"`
	// Running is the number of predictions non-terminal now.
	Running int `json:"running"`
	// RunningRefused counts creates refused because Limits.Running
	// predictions were running; they count in RateLimited too.
	RunningRefused int `json:"running_refused"`
	// RateRefused counts /v1 calls refused by Limits.Rate; they count in
	// RateLimited too.
	RateRefused int `json:"rate_refused"`
	// Calls counts every /v1 call that passed authentication, whatever
	// answered it: what Limits.Rate limits.
	Calls int `json:"calls"`
	// CallsBeforeRetryAfter counts /v1 calls made during a throttle episode
	// later than Faults.RetryAfterGrace after its first 429: calls that
	// ignored Retry-After.
	CallsBeforeRetryAfter int `json:"calls_before_retry_after"`
	// RateLimited counts 429 answers: throttle episodes' and the limits'.
	RateLimited int `json:"rate_limited"`
	// ThrottleEpisodes counts throttle episodes started.
	ThrottleEpisodes int `json:"throttle_episodes"`
	// ServerErrors counts injected 500/502/503 answers.
	ServerErrors int `json:"server_errors"`
	// NotFound counts 404 answers for unknown or lost predictions.
	NotFound int `json:"not_found"`
	// Unauthorized counts 401 answers.
	Unauthorized int `json:"unauthorized"`
	// BadRequests counts creates refused with 400, 413 or 422.
	BadRequests int `json:"bad_requests"`
	// WebhooksSent counts webhook delivery attempts answered 2xx.
	WebhooksSent int `json:"webhooks_sent"`
	// WebhookAttempts counts webhook delivery attempts.
	WebhookAttempts int `json:"webhook_attempts"`
	// WebhooksFailed counts deliveries given up without a 2xx (a "start"
	// webhook has one attempt, a "completed" one up to 6).
	// Deliveries cut short because Run stopped are not counted.
	WebhooksFailed int `json:"webhooks_failed"`
	// WebhooksDuplicated counts "completed" webhooks delivered a second time.
	WebhooksDuplicated int `json:"webhooks_duplicated"`
	// WebhooksMissing counts "completed" webhooks dropped on purpose.
	WebhooksMissing int `json:"webhooks_missing"`
	// WebhooksLate counts "completed" webhooks delayed on purpose.
	WebhooksLate int `json:"webhooks_late"`
	// PredictionsByStatus counts predictions by true current status (a lost
	// prediction counts under the status it had when it vanished).
	PredictionsByStatus map[string]int `json:"predictions_by_status"`
	// Lost counts predictions that have vanished.
	Lost int `json:"lost"`
	// Hangs, Malformed, FlapNotFound and Regressed count the status-call
	// faults answered (see Faults).
	Hangs        int `json:"hangs"`
	Malformed    int `json:"malformed"`
	FlapNotFound int `json:"flap_not_found"`
	Regressed    int `json:"regressed"`
}

// counters are the resettable parts of Stats, guarded by Server.mu.
type counters struct {
	creates, duplicateCreates           int
	keyCreates                          map[string]int
	maxCreatesPerKey                    int
	statusCalls, cancelCalls            int
	listCalls                           int
	inputFetches                        int
	peakStatus, peakCreates             int
	peakRunning                         int
	runningRefused, rateRefused         int
	calls                               int
	callsBeforeRetryAfter, rateLimited  int
	throttleEpisodes, serverErrors      int
	notFound, unauthorized, badRequests int
	webhooksSent, webhookAttempts       int
	webhooksFailed, webhooksDuplicated  int
	webhooksMissing, webhooksLate       int
	hangs, malformed, flaps, regressed  int
}
