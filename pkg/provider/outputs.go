package provider

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// MaxOutputs bounds the output URLs an adapter takes from one answer.
const MaxOutputs = 100

// IsOutputURL reports whether s is an http(s) URL, the only outputs kept.
func IsOutputURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// AppendOutputURLs appends the http(s) URLs found anywhere in the JSON value
// raw to out, in a stable order (object keys sorted, so a poll and a webhook
// of the same result agree), until out holds MaxOutputs. A value that does
// not decode adds nothing.
func AppendOutputURLs(out []string, raw []byte) []string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return out
	}
	var walk func(any)
	walk = func(v any) {
		if len(out) >= MaxOutputs {
			return
		}
		switch x := v.(type) {
		case string:
			if IsOutputURL(x) {
				out = append(out, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k])
			}
		}
	}
	walk(v)
	return out
}
