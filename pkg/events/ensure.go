package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Creating or reconciling what Setup provisions: a stream, a bucket or a
// consumer that exists already is checked against what Pollux needs and
// updated where it may be; a conflict is an *IncompatibleError.

// IncompatibleError reports an existing stream, bucket or consumer whose
// definition conflicts with what Pollux needs.
type IncompatibleError struct {
	// Kind is "stream", "bucket" or "consumer"; Name its name.
	Kind, Name string
	// Problems lists each conflicting setting, with the value found and
	// the value needed.
	Problems []string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("%s %s exists with an incompatible definition: %s; Pollux leaves it alone — remove it (nats %s rm %s) or use another subject prefix",
		e.Kind, e.Name, strings.Join(e.Problems, "; "), natsNoun(e.Kind), e.Name)
}

func natsNoun(kind string) string {
	if kind == "bucket" {
		return "kv"
	}
	return kind
}

// EnsureStream creates the stream, or checks and updates an existing one.
func EnsureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.CreateStream(ctx, want)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil, fmt.Errorf("create stream %s: %w", want.Name, err)
	}
	s, err = js.Stream(ctx, want.Name)
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	if problems := streamConflicts(have, want); len(problems) > 0 {
		return nil, &IncompatibleError{Kind: "stream", Name: want.Name, Problems: problems}
	}
	upd, changed := reconcileStream(have, want)
	if !changed {
		return s, nil
	}
	s, err = js.UpdateStream(ctx, upd)
	if err != nil {
		return nil, fmt.Errorf("update stream %s: %w", want.Name, err)
	}
	return s, nil
}

func streamConflicts(have, want jetstream.StreamConfig) []string {
	var p []string
	add := func(field string, h, w any) {
		p = append(p, fmt.Sprintf("%s is %v, needs %v", field, h, w))
	}
	// Subjects Pollux added since (the checks stream's parked checks) are
	// added to a stream that has the rest; any other difference is not
	// Pollux's stream.
	hs, ws := slices.Sorted(slices.Values(have.Subjects)), slices.Sorted(slices.Values(want.Subjects))
	if !slices.Equal(hs, ws) && !subset(hs, ws) {
		add("subjects", hs, ws)
	}
	if have.Retention != want.Retention {
		add("retention", have.Retention, want.Retention)
	}
	if have.Storage != want.Storage {
		add("storage", have.Storage, want.Storage)
	}
	if want.MaxMsgsPerSubject > 0 && have.MaxMsgsPerSubject != want.MaxMsgsPerSubject {
		add("max messages per subject", have.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	}
	if have.Discard != want.Discard && !(want.AllowMsgSchedules && have.MaxMsgs <= 0 && have.MaxBytes <= 0) {
		// Message schedules need discard "old"; without a limit on
		// messages or bytes the policy never applies.
		add("discard policy", have.Discard, want.Discard)
	}
	return p
}

// subset reports whether every one of the sorted have is in want.
func subset(have, want []string) bool {
	for _, h := range have {
		if _, ok := slices.BinarySearch(want, h); !ok {
			return false
		}
	}
	return true
}

// reconcileStream returns have with want's limits, replicas and per-subject
// discard policy (checks streams from before poll states refused a
// second message per subject instead of replacing the first), and whether
// anything changed.
func reconcileStream(have, want jetstream.StreamConfig) (jetstream.StreamConfig, bool) {
	upd := have
	upd.MaxAge = want.MaxAge
	upd.MaxBytes = cmp.Or(want.MaxBytes, -1)
	upd.MaxMsgSize = cmp.Or(want.MaxMsgSize, -1)
	upd.MaxMsgs = cmp.Or(want.MaxMsgs, -1)
	upd.Replicas = want.Replicas
	upd.Description = want.Description
	upd.DiscardNewPerSubject = want.DiscardNewPerSubject
	// What parking checks added (see Streams): the parked subjects, the
	// schedules, and the discard policy and roll-ups they need.
	upd.Subjects = want.Subjects
	upd.Discard = want.Discard
	if want.AllowMsgSchedules {
		upd.AllowMsgSchedules, upd.AllowRollup, upd.DenyPurge = true, true, false
	}
	upd.AllowDirect = upd.AllowDirect || want.AllowDirect
	metaChanged := false
	for k, v := range want.Metadata {
		if have.Metadata[k] != v {
			if !metaChanged {
				upd.Metadata = maps.Clone(have.Metadata)
				if upd.Metadata == nil {
					upd.Metadata = map[string]string{}
				}
			}
			metaChanged = true
			upd.Metadata[k] = v
		}
	}
	if want.Duplicates > 0 {
		upd.Duplicates = want.Duplicates
	}
	changed := upd.MaxAge != have.MaxAge || upd.MaxBytes != have.MaxBytes ||
		upd.MaxMsgSize != have.MaxMsgSize || upd.MaxMsgs != have.MaxMsgs || upd.Replicas != have.Replicas ||
		upd.Duplicates != have.Duplicates || upd.Description != have.Description ||
		upd.DiscardNewPerSubject != have.DiscardNewPerSubject || metaChanged ||
		!slices.Equal(upd.Subjects, have.Subjects) || upd.Discard != have.Discard ||
		upd.AllowMsgSchedules != have.AllowMsgSchedules || upd.AllowRollup != have.AllowRollup || upd.DenyPurge != have.DenyPurge ||
		upd.AllowDirect != have.AllowDirect
	return upd, changed
}

// EnsureBucket creates the KV bucket, or checks and updates an existing one.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, want)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketExists) {
		return nil, fmt.Errorf("create bucket %s: %w", want.Bucket, err)
	}
	kv, err = js.KeyValue(ctx, want.Bucket)
	if err != nil {
		return nil, fmt.Errorf("look up bucket %s: %w", want.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("bucket %s status: %w", want.Bucket, err)
	}
	have := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	var problems []string
	wantStorage := want.Storage
	if have.Storage != wantStorage {
		problems = append(problems, fmt.Sprintf("storage is %v, needs %v", have.Storage, wantStorage))
	}
	if len(problems) > 0 {
		return nil, &IncompatibleError{Kind: "bucket", Name: want.Bucket, Problems: problems}
	}
	if have.MaxAge == want.TTL && have.MaxMsgsPerSubject == int64(max(want.History, 1)) &&
		have.Replicas == max(want.Replicas, 1) {
		return kv, nil
	}
	kv, err = js.UpdateKeyValue(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("update bucket %s: %w", want.Bucket, err)
	}
	return kv, nil
}

// EnsureObjectStore creates the object store, or finds it and updates
// its TTL, size limit and replicas.
func EnsureObjectStore(ctx context.Context, js jetstream.JetStream, want jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	obs, err := js.CreateObjectStore(ctx, want)
	if err == nil {
		return obs, nil
	}
	if !errors.Is(err, jetstream.ErrBucketExists) {
		return nil, fmt.Errorf("create object store %s: %w", want.Bucket, err)
	}
	if obs, err = js.UpdateObjectStore(ctx, want); err != nil {
		return nil, fmt.Errorf("update object store %s: %w", want.Bucket, err)
	}
	return obs, nil
}

// EnsureConsumer creates the durable consumer on stream, or checks and
// updates an existing one: a different filter, ack or deliver policy is an
// *IncompatibleError; ack wait, limits and replicas are updated.
func EnsureConsumer(ctx context.Context, s jetstream.Stream, want jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := createConsumer(ctx, s, want)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, jetstream.ErrConsumerExists) {
		return nil, fmt.Errorf("create consumer %s: %w", want.Durable, err)
	}
	c, err = s.Consumer(ctx, want.Durable)
	if err != nil {
		return nil, fmt.Errorf("look up consumer %s: %w", want.Durable, err)
	}
	have := c.CachedInfo().Config
	var problems []string
	if hf, wf := filters(have), filters(want); !slices.Equal(hf, wf) {
		problems = append(problems, fmt.Sprintf("filter subjects are %v, needs %v", hf, wf))
	}
	if have.AckPolicy != want.AckPolicy {
		problems = append(problems, fmt.Sprintf("ack policy is %v, needs %v", have.AckPolicy, want.AckPolicy))
	}
	if have.DeliverPolicy != want.DeliverPolicy {
		problems = append(problems, fmt.Sprintf("deliver policy is %v, needs %v", have.DeliverPolicy, want.DeliverPolicy))
	}
	if len(problems) > 0 {
		return nil, &IncompatibleError{Kind: "consumer", Name: want.Durable, Problems: problems}
	}
	c, err = s.UpdateConsumer(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("update consumer %s: %w", want.Durable, err)
	}
	return c, nil
}

func filters(c jetstream.ConsumerConfig) []string {
	f := slices.Clone(c.FilterSubjects)
	if c.FilterSubject != "" {
		f = append(f, c.FilterSubject)
	}
	slices.Sort(f)
	return f
}

// createRetries bounds the tries of a consumer create the server failed
// with an error of its own (500: "error creating store for consumer",
// seen from a busy server moments after it started); a refusal of the
// request itself is final at once.
const createRetries = 5

// createConsumer creates a consumer, trying again after a server error
// (createRetries times, 100 ms apart and doubling, while ctx lasts).
func createConsumer(ctx context.Context, s jetstream.Stream, want jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		c, err := s.CreateConsumer(ctx, want)
		var apiErr *jetstream.APIError
		if err == nil || try == createRetries || !errors.As(err, &apiErr) || apiErr.Code < 500 {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}
