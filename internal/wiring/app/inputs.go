package app

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// InputsFlags override the configuration's inputs (config.Inputs): the
// input files apps upload through the faces, on every binary that
// serves the front door or creates jobs — cmd/ingest and pollux serve.
type InputsFlags struct {
	PublicURL     string        `name:"inputs-public-url" env:"POLLUX_INPUTS_PUBLIC_URL" placeholder:"URL" help:"The front door's base URL as the providers reach it: an uploaded input file goes to a provider as a signed, expiring URL on it (default: the config's inputs.public_url; none: files go inline up to a route's inputs.inline_max_bytes)."`
	TTL           time.Duration `name:"inputs-ttl" env:"POLLUX_INPUTS_TTL" help:"How long an uploaded input file is kept (default: the config's inputs.ttl, else 24h)."`
	MaxFileBytes  int64         `name:"inputs-max-file-bytes" env:"POLLUX_INPUTS_MAX_FILE_BYTES" help:"The largest input file an app may upload, in bytes (default: the config's inputs.max_file_bytes, else 100 MiB)."`
	MaxTokenBytes int64         `name:"inputs-max-token-bytes" env:"POLLUX_INPUTS_MAX_TOKEN_BYTES" help:"The most bytes of input files one token keeps at once (default: the config's inputs.max_token_bytes, else 1 GiB)."`
}

// Apply is in with the flags given laid over it, checked.
func (f InputsFlags) Apply(in config.Inputs) (config.Inputs, error) {
	in.PublicURL = cmp.Or(f.PublicURL, in.PublicURL)
	in.TTL = cmp.Or(f.TTL, in.TTL)
	in.MaxFileBytes = cmp.Or(f.MaxFileBytes, in.MaxFileBytes)
	in.MaxTokenBytes = cmp.Or(f.MaxTokenBytes, in.MaxTokenBytes)
	if err := config.ValidPublicURL(in.PublicURL); err != nil {
		return in, fmt.Errorf("inputs-%w", err)
	}
	if f.TTL < 0 || f.MaxFileBytes < 0 || f.MaxTokenBytes < 0 {
		return in, fmt.Errorf("--inputs-ttl, --inputs-max-file-bytes and --inputs-max-token-bytes must not be negative")
	}
	return in, nil
}

// UseInputs opens the inputs store of the configuration's inputs with
// the flags f laid over them (creating its bucket), and has every route
// give its provider the files its jobs name (route.Route.Inputs): the
// front door's faces take uploads into it (FrontDoor). Call it before the
// services start.
func (e *Env) UseInputs(ctx context.Context, f InputsFlags) (*inputs.Store, error) {
	in, err := f.Apply(e.Config.Inputs)
	if err != nil {
		return nil, err
	}
	e.Config.Inputs = in
	s, err := inputs.Open(ctx, e.JS, e.NS, inputs.Config{
		TTL: in.TTL, MaxFileBytes: in.MaxFileBytes, MaxOwnerBytes: in.MaxTokenBytes, MaxBytes: in.MaxBytes,
		UploadURLTTL: in.UploadURLTTL, Options: e.Options(),
	})
	if err != nil {
		return nil, fmt.Errorf("inputs: %w", err)
	}
	for name, r := range e.Routes {
		r.Inputs = s.Deliverer(inputs.Delivery{PublicURL: in.PublicURL, InlineMaxBytes: e.Config.Routes[name].Inputs.InlineMaxBytes})
	}
	if in.PublicURL == "" {
		e.Log.Info().Msg("no inputs public URL (--inputs-public-url): uploaded input files go to providers inline only, up to each route's inputs.inline_max_bytes")
	} else {
		e.Log.Info().Str(logkey.PublicURL, in.PublicURL).Msg("uploaded input files go to providers as signed URLs")
	}
	e.inputs = s
	return s, nil
}
