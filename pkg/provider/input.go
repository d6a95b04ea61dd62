package provider

import (
	"bytes"
	"encoding/json"
)

// InputWithModel decodes a job's input, a JSON object (none is {}), and
// sets its field to the job's model, as APIs that take the model in the
// body want it. An input that is not an object, or that sets the field to
// another model, is refused as Invalid. The caller may add fields before
// encoding it.
func InputWithModel(input json.RawMessage, field, model string) (map[string]json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(input)) > 0 {
		if err := json.Unmarshal(input, &fields); err != nil || fields == nil {
			return nil, &Error{Class: Invalid, Message: "input must be a JSON object"}
		}
	}
	m, _ := json.Marshal(model) // a string: cannot fail
	if prev, ok := fields[field]; ok && !bytes.Equal(bytes.TrimSpace(prev), m) {
		return nil, &Error{Class: Invalid, Message: "input." + field + " differs from the job's model"}
	}
	fields[field] = m
	return fields, nil
}
