package route

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
)

// ConfigKey is the configuration key a job's durations are learned under:
// the one its submission gave, else the values of the route's
// SettingsFrom fields in its input, in order, joined by "-" (a missing
// field is "_"; characters a key cannot hold become "_"; a key longer
// than 64 characters is a hash of it), else none. Jobs of one model at
// 720p and at 1080p, or of 5 s and 10 s, then learn apart, each falling
// back to the model's distribution while it has few samples.
func (r *Route) ConfigKey(given string, input json.RawMessage) string {
	if given != "" || len(r.SettingsFrom) == 0 {
		return given
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(input, &fields) != nil {
		return ""
	}
	parts := make([]string, len(r.SettingsFrom))
	found := false
	for i, name := range r.SettingsFrom {
		parts[i] = settingValue(fields[name])
		found = found || parts[i] != "_"
	}
	if !found {
		return ""
	}
	key := strings.Join(parts, "-")
	if len(key) > maxConfigKey {
		h := sha256.Sum256([]byte(key))
		key = "h" + hex.EncodeToString(h[:12])
	}
	return key
}

// Length is the output length in seconds a submission's input asks for:
// the value of the route's LengthFrom field, a number or a string holding
// one with an optional "s" ("5", "5s", "5.5 s"); 0 when the route names
// no field, or the field is missing, not a number, or not within
// (0, 1e6).
func (r *Route) Length(input json.RawMessage) float64 {
	if r.LengthFrom == "" {
		return 0
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(input, &fields) != nil {
		return 0
	}
	var v any
	if json.Unmarshal(fields[r.LengthFrom], &v) != nil {
		return 0
	}
	var x float64
	switch t := v.(type) {
	case float64:
		x = t
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(t), "s")), 64)
		if err != nil {
			return 0
		}
		x = f
	}
	if !(x > 0 && x < 1e6) {
		return 0
	}
	return x
}

// maxConfigKey is the longest configuration key the contract allows.
const maxConfigKey = 64

// settingValue is one input field's value in a configuration key: a
// string, number or boolean with every character outside [A-Za-z0-9_-]
// made "_"; "_" for a field that is missing, null, an object or a list.
func settingValue(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return "_"
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	default:
		return "_"
	}
	if s == "" {
		return "_"
	}
	return strings.Map(func(c rune) rune {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' {
			return c
		}
		return '_'
	}, s)
}
