package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Inputs configures the input files apps upload through the faces
// (Replicate's files API, fal's storage upload, OpenAI's
// input_reference): kept in Pollux's inputs bucket and named by a job's
// input by reference, and how each route's provider is given them (see
// docs/providers.md). The flags --inputs-* (POLLUX_INPUTS_*) override it.
type Inputs struct {
	// TTL is how long a file is kept after its upload (default 24h, at
	// least 1m).
	TTL time.Duration `yaml:"ttl"`
	// MaxFileBytes bounds one file (default 100 MiB).
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxTokenBytes bounds the bytes of the files one token keeps at once
	// (default 1 GiB).
	MaxTokenBytes int64 `yaml:"max_token_bytes"`
	// MaxBytes bounds the inputs bucket as a whole (default: the server's
	// limits only).
	MaxBytes int64 `yaml:"max_bytes"`
	// UploadURLTTL is how long an upload URL handed to an app (fal's
	// upload_url) may be used (default 1h).
	UploadURLTTL time.Duration `yaml:"upload_url_ttl"`
	// PublicURL is the front door's base URL as the providers reach it
	// (https://pollux.example.com): a file goes to a provider as a
	// signed, expiring URL on it. Default none: a route then sends files
	// inline (its inputs.inline_max_bytes), and a job naming a larger file
	// fails with an error saying so.
	PublicURL string `yaml:"public_url"`
}

func (in Inputs) validate() error {
	switch {
	case in.TTL != 0 && in.TTL < time.Minute:
		return errors.New("ttl: at least 1m")
	case in.MaxFileBytes < 0 || in.MaxTokenBytes < 0 || in.MaxBytes < 0:
		return errors.New("max_file_bytes, max_token_bytes and max_bytes must not be negative")
	case in.UploadURLTTL < 0:
		return errors.New("upload_url_ttl: must not be negative")
	}
	return ValidPublicURL(in.PublicURL)
}

// ValidPublicURL checks a public base URL: "" or an absolute http(s) URL
// without query, fragment or userinfo.
func ValidPublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		strings.Contains(s, "?") || strings.Contains(s, "#") {
		return fmt.Errorf("public_url: %q is not an absolute http(s) URL without query, fragment or userinfo", s)
	}
	return nil
}

// RouteInputs is how a route's provider is given the input files its
// jobs name.
type RouteInputs struct {
	// InlineMaxBytes: a file of at most this many bytes is sent inline,
	// as a data: URI in the input, where the provider takes those
	// (Replicate, fal); a larger one as a signed URL on inputs.public_url
	// (default 0: always the URL).
	InlineMaxBytes int64 `yaml:"inline_max_bytes"`
}
