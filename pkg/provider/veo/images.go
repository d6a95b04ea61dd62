package veo

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/pollux-dev/pollux/pkg/provider"
)

// Images. The Gemini API takes an image inline only: bytesBase64Encoded,
// plain base64. An image an app sent Pollux large enough to be kept as an
// input file (the genai face keeps one of 64 KiB or more) reaches the
// adapter as Pollux delivered it: with the route's inputs.inline_max_bytes
// at least its size, a data: URI, unwrapped here into the base64 Google
// takes; otherwise a signed URL, which Google cannot take — refused
// (Invalid) naming the setting, rather than sent to fail there.

// maxImageDepth bounds how deep inlineImages looks into an input.
const maxImageDepth = 16

// inlineImages is body with each bytesBase64Encoded that holds a base64
// data: URI replaced by its data.
func inlineImages(body []byte) ([]byte, error) {
	if !bytes.Contains(body, []byte(`"bytesBase64Encoded"`)) {
		return body, nil
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, &provider.Error{Class: provider.Invalid, Message: "input must be JSON"}
	}
	changed, err := unwrap(v, 0)
	if err != nil || !changed {
		return body, err
	}
	return json.Marshal(v)
}

func unwrap(v any, depth int) (bool, error) {
	if depth > maxImageDepth {
		return false, nil
	}
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "bytesBase64Encoded" {
				switch {
				case strings.HasPrefix(s, "data:"):
					head, data, ok := strings.Cut(s, ",")
					if !ok || !strings.HasSuffix(head, ";base64") {
						return false, &provider.Error{Class: provider.Invalid, Message: "bytesBase64Encoded: a data: URI that is not base64"}
					}
					x[k], changed = data, true
				case strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://"):
					return false, &provider.Error{Class: provider.Invalid, Message: "bytesBase64Encoded: the Gemini API takes an image inline only; " +
						"set the route's inputs.inline_max_bytes at least the image's size so Pollux sends it inline"}
				}
				continue
			}
			c, err := unwrap(e, depth+1)
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
	case []any:
		for _, e := range x {
			c, err := unwrap(e, depth+1)
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
	}
	return changed, nil
}
