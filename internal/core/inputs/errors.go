package inputs

import (
	"errors"
	"fmt"
)

// Errors the store returns; a face answers each in its own shape.
var (
	// ErrNotFound: no such file for this owner — unknown, expired,
	// deleted, or another owner's.
	ErrNotFound = errors.New("no such file")
	// ErrBadSignature: a signed URL that was never issued, was altered
	// or has expired; or an upload URL used already.
	ErrBadSignature = errors.New("the URL is not valid: not issued, altered, expired or used already")
	// ErrEmpty: an upload of no bytes.
	ErrEmpty = errors.New("the file is empty")
)

// TooLargeError refuses an upload past a limit: the file's own
// (MaxFileBytes) or its owner's (MaxOwnerBytes).
type TooLargeError struct {
	// Limit is the limit in bytes; Owner says it is the owner's.
	Limit int64
	Owner bool
}

func (e *TooLargeError) Error() string {
	if e.Owner {
		return fmt.Sprintf("the files kept for this token would exceed %d bytes: delete some or wait for them to expire", e.Limit)
	}
	return fmt.Sprintf("the file is larger than %d bytes", e.Limit)
}
