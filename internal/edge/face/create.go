package face

import (
	"bytes"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// CreateWait bounds how long Create waits for a create's record, so that
// the app's first poll finds it (ingest takes a durable submission within
// milliseconds); a record still missing then is answered from the create.
const CreateWait = 5 * time.Second

// Create publishes submission m on the face's route as request r's caller
// (Submit), then answers its record once it exists, or m as a pending job
// when it does not within CreateWait (Created).
func (k *Kit) Create(r *http.Request, m events.Submit) (*state.Job, error) {
	if err := k.Submit(r, m); err != nil {
		return nil, err
	}
	return k.Created(r.Context(), m, time.Now().Add(CreateWait))
}

// DecodeObject decodes body, which must be a JSON object, into v: a 400
// *Error otherwise, naming the field whose value has the wrong type.
func DecodeObject(body []byte, v any) error {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return &Error{Status: http.StatusBadRequest, Code: "invalid_body", Message: "the body must be a JSON object"}
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: te.Field,
				Message: te.Field + ": must not be a JSON " + te.Value}
		}
		return &Error{Status: http.StatusBadRequest, Code: "invalid_body", Message: "the body is not valid JSON: " + err.Error()}
	}
	return nil
}

// Base32 writes ids as lowercase base32 without padding (Replicate's,
// Google's operations).
var Base32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// IsBase32ID reports whether s is 16 bytes (IDBytes) as Base32 writes
// them: 26 characters.
func IsBase32ID(s string) bool {
	b, err := Base32.DecodeString(s)
	return err == nil && len(b) == 16 && Base32.EncodeToString(b) == s
}

// UUID formats 16 bytes (IDBytes) as a UUID's 8-4-4-4-12 lowercase hex,
// the ids of Runway's tasks and Luma's generations.
func UUID(b []byte) string {
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// IsUUID reports whether s has the shape UUID writes.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range []byte(s) {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// DeleteCancels is the delete of APIs whose delete cancels a job under way
// and removes an ended one (Runway's tasks, Luma's generations): it asks
// for the cancel of the job the path's {id} names, if it is under way, and
// answers 204. Pollux keeps the record of a job that has ended — its
// history is not the app's to erase — so deleting one changes nothing.
func (k *Kit) DeleteCancels(reason string) Handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		j, err := k.Job(r, r.PathValue("id"))
		if err != nil {
			return err
		}
		if err := k.Cancel(r, j, reason); err != nil && !errors.Is(err, ErrTerminal) {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}
