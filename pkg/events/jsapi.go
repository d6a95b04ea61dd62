package events

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream API error codes Pollux acts on, named once (nats-server's
// JSErrCode values, server/errors.json). Every package that branches on a
// refusal from JetStream asks IsAPIError with one of these.
const (
	// CodeNoPeers: a cluster has too few peers for the replicas asked
	// (it is still forming).
	CodeNoPeers = 10005
	// CodeUnavailable: the JetStream system is temporarily unavailable.
	CodeUnavailable = 10008
	// CodeNotLeader: the cluster cannot handle the request now (no leader).
	CodeNotLeader = 10009
	// CodeNoMessage: no message at that sequence or on that subject.
	CodeNoMessage = 10037
	// CodeWrongLastSequence: a publish expected another message to be the
	// subject's (or stream's) latest.
	CodeWrongLastSequence = 10071
	// CodeWrongLastSequenceR: the same refusal as a replicated stream
	// reports it.
	CodeWrongLastSequenceR = 10164
	// CodeStoreFailed: the store refused the message; on a stream with
	// one message per subject and DiscardNewPerSubject, the subject has
	// its message already.
	CodeStoreFailed = 10077
	// CodeConsumerNotUnique: a work-queue stream refused a consumer whose
	// filter overlaps another's.
	CodeConsumerNotUnique = 10100
)

// IsAPIError reports whether err is a JetStream API error with one of the
// given codes.
func IsAPIError(err error, codes ...int) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	for _, c := range codes {
		if int(apiErr.ErrorCode) == c {
			return true
		}
	}
	return false
}

// IsWrongLastSequence reports a publish refused because the message it
// expected on the subject is no longer the latest (or none was expected
// and one is there), however the stream is replicated.
func IsWrongLastSequence(err error) bool {
	return IsAPIError(err, CodeWrongLastSequence, CodeWrongLastSequenceR)
}
