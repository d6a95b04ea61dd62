// Package logkey names the keys of Pollux's structured log lines (zerolog
// JSON, one object a line): every component writes a job's id as job_id,
// its route as route, the provider's id as remote_id, and so on, so a log
// pipeline can follow a job across ingest, the pollers, the webhook
// receiver and the front door by one set of keys. Code writes a key
// through these constants, never as a literal.
package logkey

// The keys, by what they name.
const (
	// Accepted is the log key "accepted".
	Accepted = "accepted"
	// Action is the log key "action".
	Action = "action"
	// Addr is the log key "addr".
	Addr = "addr"
	// AllowedHosts is the log key "allowed_hosts".
	AllowedHosts = "allowed_hosts"
	// Answer is the log key "answer".
	Answer = "answer"
	// App is the log key "app".
	App = "app"
	// Attempt is the log key "attempt".
	Attempt = "attempt"
	// Attempts is the log key "attempts".
	Attempts = "attempts"
	// By is the log key "by".
	By = "by"
	// Bytes is the log key "bytes".
	Bytes = "bytes"
	// Chose is the log key "chose".
	Chose = "chose"
	// Component is the log key "component".
	Component = "component"
	// ConfigKey is the log key "config_key".
	ConfigKey = "config_key"
	// Configured is the log key "configured".
	Configured = "configured"
	// Consumer is the log key "consumer".
	Consumer = "consumer"
	// DeliveryID is the log key "delivery_id".
	DeliveryID = "delivery_id"
	// DetectedBy is the log key "detected_by".
	DetectedBy = "detected_by"
	// Endpoint is the log key "endpoint".
	Endpoint = "endpoint"
	// Endpoints is the log key "endpoints".
	Endpoints = "endpoints"
	// ErrorClass is the log key "error_class".
	ErrorClass = "error_class"
	// Events is the log key "events".
	Events = "events"
	// Face is the log key "face".
	Face = "face"
	// FileID is the log key "file_id".
	FileID = "file_id"
	// Freed is the log key "freed".
	Freed = "freed"
	// From is the log key "from".
	From = "from"
	// Hedge is the log key "hedge".
	Hedge = "hedge"
	// HedgeOf is the log key "hedge_of".
	HedgeOf = "hedge_of"
	// HedgeRoute is the log key "hedge_route".
	HedgeRoute = "hedge_route"
	// HedgeTo is the log key "hedge_to".
	HedgeTo = "hedge_to"
	// Host is the log key "host".
	Host = "host"
	// IntakeSeq is the log key "intake_seq".
	IntakeSeq = "intake_seq"
	// JobID is the log key "job_id".
	JobID = "job_id"
	// JobRoute is the log key "job_route".
	JobRoute = "job_route"
	// Kept is the log key "kept".
	Kept = "kept"
	// Key is the log key "key".
	Key = "key"
	// Kind is the log key "kind".
	Kind = "kind"
	// Level is the log key "level".
	Level = "level"
	// Matched is the log key "matched".
	Matched = "matched"
	// Method is the log key "method".
	Method = "method"
	// Model is the log key "model".
	Model = "model"
	// ModelRoute is the log key "model_route".
	ModelRoute = "model_route"
	// Op is the log key "op".
	Op = "op"
	// Outcome is the log key "outcome".
	Outcome = "outcome"
	// Output is the log key "output".
	Output = "output"
	// Outputs is the log key "outputs".
	Outputs = "outputs"
	// OutputsExpireAt is the log key "outputs_expire_at".
	OutputsExpireAt = "outputs_expire_at"
	// OwnerSeq is the log key "owner_seq".
	OwnerSeq = "owner_seq"
	// Partitions is the log key "partitions".
	Partitions = "partitions"
	// Path is the log key "path".
	Path = "path"
	// Paused is the log key "paused".
	Paused = "paused"
	// PausedUntil is the log key "paused_until".
	PausedUntil = "paused_until"
	// Polls is the log key "polls".
	Polls = "polls"
	// Problem is the log key "problem".
	Problem = "problem"
	// ProviderStatus is the log key "provider_status".
	ProviderStatus = "provider_status"
	// PublicURL is the log key "public_url".
	PublicURL = "public_url"
	// Queue is the log key "queue".
	Queue = "queue"
	// Rate is the log key "rate".
	Rate = "rate"
	// Reason is the log key "reason".
	Reason = "reason"
	// RecordedRemoteID is the log key "recorded_remote_id".
	RecordedRemoteID = "recorded_remote_id"
	// Remote is the log key "remote".
	Remote = "remote"
	// RemoteID is the log key "remote_id".
	RemoteID = "remote_id"
	// Removed is the log key "removed".
	Removed = "removed"
	// ResubmitOf is the log key "resubmit_of".
	ResubmitOf = "resubmit_of"
	// RetryIn is the log key "retry_in".
	RetryIn = "retry_in"
	// Role is the log key "role".
	Role = "role"
	// Route is the log key "route".
	Route = "route"
	// Routes is the log key "routes".
	Routes = "routes"
	// RoutesKept is the log key "routes_kept".
	RoutesKept = "routes_kept"
	// RunningCap is the log key "running_cap".
	RunningCap = "running_cap"
	// Seq is the log key "seq".
	Seq = "seq"
	// Server is the log key "server".
	Server = "server"
	// State is the log key "state".
	State = "state"
	// Status is the log key "status".
	Status = "status"
	// Stream is the log key "stream".
	Stream = "stream"
	// StreamSeq is the log key "stream_seq".
	StreamSeq = "stream_seq"
	// Strikes is the log key "strikes".
	Strikes = "strikes"
	// Subject is the log key "subject".
	Subject = "subject"
	// TicketSeq is the log key "ticket_seq".
	TicketSeq = "ticket_seq"
	// To is the log key "to".
	To = "to"
	// Tokens is the log key "tokens".
	Tokens = "tokens"
	// Until is the log key "until".
	Until = "until"
	// WaitedFor is the log key "waited_for".
	WaitedFor = "waited_for"
	// WaitingFor is the log key "waiting_for".
	WaitingFor = "waiting_for"
	// Was is the log key "was".
	Was = "was"
	// Why is the log key "why".
	Why = "why"
)
