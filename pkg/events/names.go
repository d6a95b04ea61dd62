package events

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultPrefix is the default subject prefix.
const DefaultPrefix = "pollux"

// MaxTokenLen is the longest route name, job id or prefix.
const MaxTokenLen = 128

// ValidToken reports whether s is a non-empty token of [A-Za-z0-9_-] of at
// most MaxTokenLen bytes: a valid route name, job id or prefix.
func ValidToken(s string) bool {
	if s == "" || len(s) > MaxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// tokenProblem explains why s is not a valid token.
func tokenProblem(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > MaxTokenLen:
		return fmt.Sprintf("%d bytes, longer than %d", len(s), MaxTokenLen)
	}
	return fmt.Sprintf("%q has characters outside [A-Za-z0-9_-]", s)
}

// Intake kinds: the second token of an intake subject.
const (
	KindSubmit = "submit"
	KindTrack  = "track"
	KindCancel = "cancel"
)

// Slot kinds: a route's two budgets.
const (
	SlotSubmit = "submit"
	SlotStatus = "status"
)

// Namespace names everything of one Pollux deployment: subjects, streams,
// consumers and buckets all derive from its prefix.
type Namespace struct {
	prefix string
}

// NewNamespace returns the namespace for prefix ("" means DefaultPrefix).
func NewNamespace(prefix string) (Namespace, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !ValidToken(prefix) || len(prefix) > 32 {
		return Namespace{}, fmt.Errorf("subject prefix %q: must be 1-32 characters of [A-Za-z0-9_-]", prefix)
	}
	return Namespace{prefix: prefix}, nil
}

// Default is the namespace of DefaultPrefix.
var Default = Namespace{prefix: DefaultPrefix}

// Prefix returns the subject prefix.
func (n Namespace) Prefix() string { return n.prefix }

func (n Namespace) subject(parts ...string) string {
	return n.prefix + "." + strings.Join(parts, ".")
}

// Submit is the subject for submissions to route.
func (n Namespace) Submit(route string) string { return n.subject(KindSubmit, route) }

// Track is the subject for jobs submitted elsewhere that route should track.
func (n Namespace) Track(route string) string { return n.subject(KindTrack, route) }

// Cancel is the subject for cancel requests on route.
func (n Namespace) Cancel(route string) string { return n.subject(KindCancel, route) }

// Intake returns the intake subject of the given kind for route.
func (n Namespace) Intake(kind, route string) string { return n.subject(kind, route) }

// IntakeMsgID is the Nats-Msg-Id of an intake message of kind (KindSubmit,
// KindTrack) for job id on route: a publisher that sends the same message
// again — it got no ack, and cannot tell whether the first was stored —
// sets it, and the intake stream stores the message once within its
// duplicate window (IntakeDuplicates). The front door does.
func IntakeMsgID(kind, route, id string) string { return kind + ":" + route + ":" + id }

// CheckSlots is how many hash slots a route's check messages are spread
// over; a job's slot is the third token of its check subject. Partitions
// group slots (partition p of N takes the slots s with s mod N = p), so a
// route has 1 to CheckSlots partitions, and changing their number changes
// which consumer delivers a check, never its subject.
const CheckSlots = 64

// CheckSlot is job's slot: FNV-1a of the id, modulo CheckSlots.
func CheckSlot(job string) int {
	h := uint32(2166136261)
	for i := 0; i < len(job); i++ {
		h ^= uint32(job[i])
		h *= 16777619
	}
	return int(h % CheckSlots)
}

// Check is the subject of a job's check message (its poll timer).
func (n Namespace) Check(route, job string) string {
	return n.subject("checks", route, strconv.Itoa(CheckSlot(job)), job)
}

// Parked is the subject of a job's parked check: a check whose next poll
// is far enough away to wait as a message schedule in the checks stream
// rather than ack-pending in a poller's consumer. It fires ParkedLead
// before the poll is due, onto the job's check subject (Check), so
// whichever partition holds the job's slot then delivers it. No consumer
// reads it.
func (n Namespace) Parked(route, job string) string {
	return n.subject("parked", route, strconv.Itoa(CheckSlot(job)), job)
}

// CheckOrParked is the filter matching both of a job's check subjects, the
// live one (Check) and the parked one (Parked): the latest message on it
// is the job's check, and every publish of a check expects it (so a
// check is parked, replaced or fired one step at a time).
func (n Namespace) CheckOrParked(route, job string) string {
	return n.subject("*", route, strconv.Itoa(CheckSlot(job)), job)
}

// ParkedChecks is the filter for route's parked checks.
func (n Namespace) ParkedChecks(route string) string { return n.subject("parked", route, "*", "*") }

// ParkedInSlot is the filter for route's parked checks in one slot.
func (n Namespace) ParkedInSlot(route string, slot int) string {
	return n.subject("parked", route, strconv.Itoa(slot), "*")
}

// AllParked is the filter for every route's parked checks.
func (n Namespace) AllParked() string { return n.subject("parked", "*", "*", "*") }

// IsParked reports whether subject is a parked check's.
func (n Namespace) IsParked(subject string) bool {
	return strings.HasPrefix(subject, n.prefix+".parked.")
}

// Checks is the filter for all of route's check messages.
func (n Namespace) Checks(route string) string { return n.subject("checks", route, "*", "*") }

// PartitionChecks returns the filters of partition p of a route whose
// checks are split into parts partitions (1 to CheckSlots).
func (n Namespace) PartitionChecks(route string, p, parts int) []string {
	if parts <= 1 {
		return []string{n.Checks(route)}
	}
	var out []string
	for s := p; s < CheckSlots; s += parts {
		out = append(out, n.subject("checks", route, strconv.Itoa(s), "*"))
	}
	return out
}

// Webhook is the subject verified webhook deliveries for route go to.
func (n Namespace) Webhook(route string) string { return n.subject("webhooks", route) }

// Event is the subject of a job's events.
func (n Namespace) Event(route, job string) string { return n.subject("events", route, job) }

// RouteEvent is the subject of a route's own events (RouteEvent): one
// token shorter than its jobs', so a subscriber to "<prefix>.events.<route>.*"
// sees jobs alone.
func (n Namespace) RouteEvent(route string) string { return n.subject("events", route) }

// Events is the filter for every event of every job.
func (n Namespace) Events() string { return n.subject("events", ">") }

// Budget levels: a call needs a lease at every level it belongs to.
const (
	// LevelGlobal is everything Pollux calls.
	LevelGlobal = "global"
	// LevelAccount is a provider account, shared by any number of routes.
	LevelAccount = "account"
	// LevelRoute is one route.
	LevelRoute = "route"
	// LevelApp is one app's jobs, whichever routes they take: its
	// request quota (apps.<name>.rate) and its running cap
	// (apps.<name>.max_running).
	LevelApp = "app"
	// LevelAppWaiting is one app's jobs admitted and not yet sent to a
	// provider: its waiting cap (apps.<name>.max_waiting).
	LevelAppWaiting = "app_waiting"
	// LevelToken is one front door token's requests: its quota (rate= in
	// the tokens file); its name is a digest of the token, never the
	// token.
	LevelToken = "token"
)

// Scope is the subject token of a budget level: a route's own name (so a
// route's leases keep the subjects they had before levels existed),
// "account~<name>" for an account, "~global" for the global level,
// "app~<name>" and "waiting~<name>" for an app's running and waiting
// jobs, "token~<digest>" for a token's requests. Route, account and app
// names are [A-Za-z0-9_-], so no two scopes collide.
func Scope(level, name string) string {
	switch level {
	case LevelGlobal:
		return "~global"
	case LevelAccount:
		return "account~" + name
	case LevelApp:
		return "app~" + name
	case LevelAppWaiting:
		return "waiting~" + name
	case LevelToken:
		return "token~" + name
	}
	return name
}

// ParseScope returns the level and name of a scope token (see Scope).
func ParseScope(scope string) (level, name string) {
	switch {
	case scope == "~global":
		return LevelGlobal, ""
	case strings.HasPrefix(scope, "account~"):
		return LevelAccount, strings.TrimPrefix(scope, "account~")
	case strings.HasPrefix(scope, "app~"):
		return LevelApp, strings.TrimPrefix(scope, "app~")
	case strings.HasPrefix(scope, "waiting~"):
		return LevelAppWaiting, strings.TrimPrefix(scope, "waiting~")
	case strings.HasPrefix(scope, "token~"):
		return LevelToken, strings.TrimPrefix(scope, "token~")
	}
	return LevelRoute, scope
}

// Slot is the subject of lease i of a scope's budget of the given kind.
func (n Namespace) Slot(scope, kind string, i int) string {
	return n.subject("slots", scope, kind, strconv.Itoa(i))
}

// Slots is the filter for all leases of a scope's budget of a kind.
func (n Namespace) Slots(scope, kind string) string { return n.subject("slots", scope, kind, "*") }

// RunningStream names the stream of a scope's running slots: one message
// per job created at the provider and not yet ended, at most the level's
// running cap (MaxMsgs with DiscardNew).
func (n Namespace) RunningStream(level, name string) string {
	switch level {
	case LevelGlobal:
		return n.stream("RUNNING_G")
	case LevelAccount:
		return n.stream("RUNNING_A_" + name)
	case LevelApp:
		return n.stream("RUNNING_APP_" + name)
	case LevelAppWaiting:
		return n.stream("WAITING_APP_" + name)
	}
	return n.stream("RUNNING_R_" + name)
}

// Running is the subject of job's running slot in scope.
func (n Namespace) Running(scope, job string) string { return n.subject("running", scope, job) }

// RunningJob returns the job id of a running slot's subject.
func (n Namespace) RunningJob(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// ErrSubject reports a subject that is not of the expected shape.
var ErrSubject = errors.New("unexpected subject")

// ParseIntake splits an intake subject into its kind and route. The route is
// returned even when it is not a valid token, so the caller can reject it by
// name.
func (n Namespace) ParseIntake(subject string) (kind, route string, err error) {
	rest, ok := strings.CutPrefix(subject, n.prefix+".")
	if !ok {
		return "", "", fmt.Errorf("%w %q: not under %q", ErrSubject, subject, n.prefix)
	}
	kind, route, ok = strings.Cut(rest, ".")
	if !ok || (kind != KindSubmit && kind != KindTrack && kind != KindCancel) {
		return "", "", fmt.Errorf("%w %q: not an intake subject", ErrSubject, subject)
	}
	return kind, route, nil
}

// ParseCheck splits a check subject into its route and job id; the slot
// token must be the job's.
func (n Namespace) ParseCheck(subject string) (route, job string, err error) {
	rest, ok := strings.CutPrefix(subject, n.prefix+".checks.")
	if !ok {
		return "", "", fmt.Errorf("%w %q: not a check subject", ErrSubject, subject)
	}
	route, rest, ok1 := strings.Cut(rest, ".")
	slot, job, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !ValidToken(route) || !ValidToken(job) {
		return "", "", fmt.Errorf("%w %q: not a check subject", ErrSubject, subject)
	}
	if slot != strconv.Itoa(CheckSlot(job)) {
		return "", "", fmt.Errorf("%w %q: slot %s is not job %s's", ErrSubject, subject, slot, job)
	}
	return route, job, nil
}

// ParseWebhook returns the route of a webhook delivery subject.
func (n Namespace) ParseWebhook(subject string) (route string, err error) {
	route, ok := strings.CutPrefix(subject, n.prefix+".webhooks.")
	if !ok || !ValidToken(route) {
		return "", fmt.Errorf("%w %q: not a webhook subject", ErrSubject, subject)
	}
	return route, nil
}

func (n Namespace) stream(name string) string {
	return strings.ToUpper(strings.ReplaceAll(n.prefix, "-", "_")) + "_" + name
}

// IntakeStream names the work-queue stream of submit, track and cancel requests.
func (n Namespace) IntakeStream() string { return n.stream("INTAKE") }

// ChecksStream names the work-queue stream of check messages (poll timers).
func (n Namespace) ChecksStream() string { return n.stream("CHECKS") }

// WebhooksStream names the work-queue stream of verified webhook deliveries.
func (n Namespace) WebhooksStream() string { return n.stream("WEBHOOKS") }

// EventsStream names the limits stream of job events.
func (n Namespace) EventsStream() string { return n.stream("EVENTS") }

// SlotsStream names the work-queue stream of budget leases.
func (n Namespace) SlotsStream() string { return n.stream("SLOTS") }

// JobsBucket names the KV bucket of job records.
func (n Namespace) JobsBucket() string { return n.prefix + "-jobs" }

// RoutesBucket names the KV bucket of route pauses (keyed by route) and
// of the census's cursors (UnresolvedKey).
func (n Namespace) RoutesBucket() string { return n.prefix + "-routes" }

// UnresolvedKey is the routes-bucket key of a route's oldest-unresolved
// cursor (internal/edge/census). Pauses are keyed by the bare route name or by
// "account.<name>"; a pause watcher watches those two shapes alone.
func UnresolvedKey(route string) string { return "unresolved." + route }

// LimitsBucket names the KV bucket of learned call rates.
func (n Namespace) LimitsBucket() string { return n.prefix + "-limits" }

// LimitsKey is the limits bucket's key of a scope's (Scope) learned rate
// of a kind of call: "global.submit", "account.<name>.status",
// "route.<name>.submit".
func LimitsKey(scope, kind string) string {
	level, name := ParseScope(scope)
	if level == LevelGlobal {
		return level + "." + kind
	}
	return level + "." + name + "." + kind
}

// DeliveriesBucket names the KV bucket of webhook delivery ids seen.
func (n Namespace) DeliveriesBucket() string { return n.prefix + "-deliveries" }

// StatsBucket names the KV bucket of learned duration statistics.
func (n Namespace) StatsBucket() string { return n.prefix + "-stats" }

// SpendBucket names the KV bucket of the apps' spend: each period's total
// and each admitted job's estimate (package spend).
func (n Namespace) SpendBucket() string { return n.prefix + "-spend" }

// IngestConsumer names the durable consumer of route's intake.
func (n Namespace) IngestConsumer(route string) string { return "ingest-" + route }

// PollerConsumer names the durable consumer of route's check messages
// when they are not partitioned.
func (n Namespace) PollerConsumer(route string) string { return "poller-" + route }

// PartitionConsumer names the durable consumer of partition p of parts of
// route's check messages: PollerConsumer(route) when parts is 1, else
// poller-<route>~<p>of<parts> ("~" cannot occur in a route name).
func (n Namespace) PartitionConsumer(route string, p, parts int) string {
	if parts <= 1 {
		return n.PollerConsumer(route)
	}
	return fmt.Sprintf("poller-%s~%dof%d", route, p, parts)
}

// ParsePollerConsumer reads a consumer name made by PartitionConsumer.
func (n Namespace) ParsePollerConsumer(name string) (route string, p, parts int, ok bool) {
	rest, ok := strings.CutPrefix(name, "poller-")
	if !ok {
		return "", 0, 0, false
	}
	route, part, partitioned := strings.Cut(rest, "~")
	if !ValidToken(route) {
		return "", 0, 0, false
	}
	if !partitioned {
		return route, 0, 1, true
	}
	ps, ns, ok := strings.Cut(part, "of")
	p, err1 := strconv.Atoi(ps)
	parts, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || parts < 2 || parts > CheckSlots || p < 0 || p >= parts ||
		ps != strconv.Itoa(p) || ns != strconv.Itoa(parts) {
		return "", 0, 0, false
	}
	return route, p, parts, true
}

// WebhookConsumer names the durable consumer that applies webhook deliveries.
func (n Namespace) WebhookConsumer() string { return "webhook-apply" }
