package events

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Output custody (package custody): succeeded jobs whose outputs are to be
// kept, or watched until they expire, wait in the work-queue stream
// CustodyStream on Custody(route, job), one message per job; the outputs
// kept are objects of the object store OutputsBucket named
// OutputObject(job, index). Both are made by the process that copies.

// CustodyStream names the work-queue stream of jobs whose outputs are
// being kept or watched.
func (n Namespace) CustodyStream() string { return n.stream("CUSTODY") }

// Custody is the subject of a job's custody work.
func (n Namespace) Custody(route, job string) string { return n.subject("custody", route, job) }

// OutputsBucket names the object store of kept outputs.
func (n Namespace) OutputsBucket() string { return n.prefix + "-outputs" }

// OutputObject is the object name of a job's output index.
func OutputObject(job string, index int) string { return job + "/" + strconv.Itoa(index) }

// CustodyStreamConfig is the stream of custody work: a work queue (a job
// leaves once its outputs are saved, or warned about, or given up),
// deduplicated on the job for an hour (its succeeded event redelivered to
// the copier).
func (n Namespace) CustodyStreamConfig(o Options) jetstream.StreamConfig {
	o = o.WithDefaults()
	return jetstream.StreamConfig{
		Name:        n.CustodyStream(),
		Description: "Pollux output custody: succeeded jobs whose outputs are being kept or watched until they expire",
		Subjects:    []string{n.subject("custody", "*", "*")},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     o.storage(),
		Replicas:    o.Replicas,
		Duplicates:  time.Hour,
		MaxAge:      31 * 24 * time.Hour,
		MaxMsgSize:  1 << 20,
	}
}

// OutputsBucketConfig is the object store of kept outputs, each kept for
// ttl after it was saved.
func (n Namespace) OutputsBucketConfig(o Options, ttl time.Duration) jetstream.ObjectStoreConfig {
	o = o.WithDefaults()
	return jetstream.ObjectStoreConfig{
		Bucket: n.OutputsBucket(), Description: "Pollux output custody: succeeded jobs' outputs, kept before the provider deletes them",
		TTL: ttl, Storage: o.storage(), Replicas: o.Replicas,
	}
}

// InputsBucket names the object store of uploaded input files (package
// inputs): files a face received from an app, which a job's input names
// by reference.
func (n Namespace) InputsBucket() string { return n.prefix + "-inputs" }

// InputsBucketConfig is the object store of uploaded input files, each
// kept for ttl after it was uploaded; at most maxBytes in all (0: no
// limit but the server's).
func (n Namespace) InputsBucketConfig(o Options, ttl time.Duration, maxBytes int64) jetstream.ObjectStoreConfig {
	o = o.WithDefaults()
	return jetstream.ObjectStoreConfig{
		Bucket: n.InputsBucket(), Description: "Pollux input files: uploads a job's input names by reference",
		TTL: ttl, MaxBytes: maxBytes, Storage: o.storage(), Replicas: o.Replicas,
	}
}
