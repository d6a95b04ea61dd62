package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Input files. With Config.FetchInputs the sim takes each file a create's
// input names as Replicate does: an http(s) URL is fetched when the
// prediction is made, a data: URI decoded; each file's SHA-256 is
// recorded with the prediction (InputFiles, GET /_sim/inputs), so a test
// sees exactly the bytes the provider received, and how often. A URL
// that cannot be fetched refuses the create (422), as a provider that
// cannot read an input does; a create replayed by its Idempotency-Key
// fetches nothing.

// MaxInputBytes bounds one input file the sim fetches or decodes.
const MaxInputBytes = 200 << 20

// inputFetchTimeout bounds the fetch of one input file.
const inputFetchTimeout = time.Minute

// InputFile is one file a prediction's input named, as the sim received
// it.
type InputFile struct {
	// Prediction is the prediction's id; Field the input's field (a JSON
	// path such as image or frames[1]).
	Prediction string `json:"prediction"`
	Field      string `json:"field"`
	// Via is how it came: "url" (fetched) or "data" (a data: URI).
	Via string `json:"via"`
	// Size and SHA256 are its length and hex SHA-256.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// InputStats count the sim's input files.
type InputStats struct {
	// Fetches counts the input URLs fetched (a create that fetched and
	// then found its Idempotency-Key's prediction counts too).
	Fetches int `json:"fetches"`
	// Files are the files of each prediction made, in order.
	Files []InputFile `json:"files"`
}

// InputFiles returns what the sim received of the predictions' input
// files.
func (s *Server) InputFiles() InputStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return InputStats{Fetches: s.c.inputFetches, Files: slices.Clone(s.inputFiles)}
}

// receiveInputs fetches or decodes the files input names (unless the
// create replays key's prediction), or says why it cannot.
func (s *Server) receiveInputs(ctx context.Context, input json.RawMessage, key string) ([]InputFile, error) {
	if !s.cfg.FetchInputs || len(input) == 0 {
		return nil, nil
	}
	if key != "" {
		s.mu.Lock()
		_, seen := s.keys[key]
		s.mu.Unlock()
		if seen {
			return nil, nil
		}
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return nil, nil // parseCreate judged it
	}
	var files []InputFile
	var walk func(v any, path string) error
	walk = func(v any, path string) error {
		switch x := v.(type) {
		case string:
			f, err := s.receive(ctx, x)
			if err != nil {
				return fmt.Errorf("input.%s: %w", path, err)
			}
			if f != nil {
				f.Field = path
				files = append(files, *f)
			}
		case map[string]any:
			for k, e := range x {
				if err := walk(e, strings.TrimPrefix(path+"."+k, ".")); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := walk(e, path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(v, ""); err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b InputFile) int { return strings.Compare(a.Field, b.Field) })
	return files, nil
}

// receive takes one input string: the file it names, or nil when it
// names none.
func (s *Server) receive(ctx context.Context, v string) (*InputFile, error) {
	switch {
	case strings.HasPrefix(v, "data:"):
		_, data, ok := strings.Cut(v, ",")
		if !ok || !strings.Contains(v[:len(v)-len(data)], ";base64") {
			return nil, nil
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("a data: URI that does not decode")
		}
		return fileOf("data", bytes.NewReader(b))
	case strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://"):
		ctx, cancel := context.WithTimeout(ctx, inputFetchTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, v, nil)
		if err != nil {
			return nil, fmt.Errorf("not a URL")
		}
		s.mu.Lock()
		s.c.inputFetches++
		s.mu.Unlock()
		resp, err := s.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetching the file failed: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("fetching the file answered %d", resp.StatusCode)
		}
		return fileOf("url", resp.Body)
	}
	return nil, nil
}

// fileOf hashes a file's bytes.
func fileOf(via string, r io.Reader) (*InputFile, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(r, MaxInputBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the file failed: %w", err)
	case n > MaxInputBytes:
		return nil, fmt.Errorf("the file is larger than %d bytes", MaxInputBytes)
	}
	return &InputFile{Via: via, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// recordInputs records the files of prediction id, once.
func (s *Server) recordInputs(id string, files []InputFile) {
	if len(files) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.inputFiles {
		if f.Prediction == id {
			return // a replay's, or a racing create's
		}
	}
	for _, f := range files {
		f.Prediction = id
		s.inputFiles = append(s.inputFiles, f)
	}
}
