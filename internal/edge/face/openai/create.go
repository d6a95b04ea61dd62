package openai

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/platform/formdata"
	"github.com/pollux-dev/pollux/pkg/events"
)

// Bounds of a create. A reference image travels inside the submission
// (a data: URI in the provider input), and a submission is at most
// events.MaxMessageBytes: a reference file is at most maxReference bytes,
// and the body, with a prompt of up to maxPrompt, at most maxBody.
const (
	maxReference = 128 << 10
	maxPrompt    = 32 << 10
	maxBody      = 192 << 10
	maxField     = 2048 // any other field
	maxSeconds   = 60
)

// createWait bounds how long a create waits for its job's record, so
// that the app's first retrieve finds it (ingest takes a submission in
// milliseconds; the submission is durable before the wait begins).
const createWait = 10 * time.Second

var sizeRe = regexp.MustCompile(`^[1-9][0-9]{1,4}x[1-9][0-9]{1,4}$`)

// createForm is what a create's form says.
type createForm struct {
	model, prompt, seconds, size string
	// reference is the input reference: a data: URI of the uploaded
	// image, or the URL the app gave.
	reference string
}

// create is POST /v1/videos: a multipart form (model, prompt, seconds,
// size, input_reference) submitted as a Pollux job, answered with the
// video once the job has a record.
func (f *Face) create(w http.ResponseWriter, r *http.Request) error {
	key, err := face.IdempotencyKey(r)
	if err != nil {
		return err
	}
	files, err := f.Files(r)
	if err != nil {
		files = nil // none kept: a reference image travels inline, bounded
	}
	form, err := readForm(w, r, files)
	if err != nil {
		return err
	}
	id := idPrefix + hex.EncodeToString(face.IDBytes(r.Context(), face.OpenAI, f.Mount().Route, key, 16))
	in := map[string]string{"prompt": form.prompt, "seconds": form.seconds, "size": form.size}
	if form.reference != "" {
		in["input_reference"] = form.reference
	}
	input, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding the input: %w", err)
	}
	md := map[string]string{face.MetaFace: string(face.OpenAI), metaModel: form.model, metaSeconds: form.seconds, metaSize: form.size}
	if len(form.prompt) <= events.MaxMetadataValue && !hasControl(form.prompt) {
		md[metaPrompt] = form.prompt
	}
	m := events.Submit{V: events.Version, ID: id, IdempotencyKey: key, Model: form.model, Input: input, Metadata: md}
	if err := f.Submit(r, m); err != nil {
		return err
	}
	// Durable, so the job will be; a record still missing at the bound is
	// answered from what was submitted, as the record will say.
	j, err := f.Created(r.Context(), m, time.Now().Add(f.createWait))
	if err != nil {
		return err
	}
	return f.writeVideo(w, j)
}

// readForm reads and checks a create's multipart form. With files, an
// uploaded reference image streams into them (the form's reference is
// its pollux-input:// reference, bounded by the files' limits); without,
// it travels inline, at most maxReference bytes.
func readForm(w http.ResponseWriter, r *http.Request, files *face.Files) (createForm, error) {
	var form createForm
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return form, invalid("", "invalid_content_type", "The body must be multipart/form-data (model, prompt, seconds, size, input_reference).")
	}
	if params["boundary"] == "" {
		return form, invalid("", "invalid_body", "The multipart body does not parse: no boundary in its Content-Type")
	}
	if files == nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	}
	// An uploaded reference streams in large pieces (formdata).
	mr := formdata.NewReader(r.Body, params["boundary"])
	seen := map[string]bool{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return form, bodyError(err)
		}
		name := p.FormName()
		if seen[name] {
			return form, invalid(name, "duplicate_parameter", fmt.Sprintf("Duplicate parameter: '%s'.", name))
		}
		seen[name] = true
		switch name {
		case "input_reference":
			if p.FileName() == "" {
				return form, invalid(name, "invalid_type", "input_reference: an image file, or input_reference[image_url]")
			}
			if files != nil {
				form.reference, err = upload(w, r, files, p)
			} else {
				form.reference, err = reference(p)
			}
		case "input_reference[image_url]":
			var u string
			if u, err = text(p, maxField); err == nil {
				form.reference, err = imageURL(u)
			}
		case "input_reference[file_id]":
			return form, invalid(name, "unsupported_parameter", "Pollux keeps no files: upload the image as input_reference, or give input_reference[image_url].")
		case "model":
			form.model, err = text(p, events.MaxModelLen)
		case "prompt":
			form.prompt, err = text(p, maxPrompt)
		case "seconds":
			form.seconds, err = text(p, maxField)
		case "size":
			form.size, err = text(p, maxField)
		default:
			return form, invalid(name, "unknown_parameter", fmt.Sprintf("Unknown parameter: '%s'.", name))
		}
		var fe *face.Error
		switch {
		case errors.As(err, &fe):
			fe.Field = name // the helpers do not know the field they read
			return form, fe
		case err != nil:
			return form, bodyError(err)
		}
	}
	if err := form.check(); err != nil {
		return form, err
	}
	return form, nil
}

// check checks the form's fields and fills in the defaults.
func (c *createForm) check() error {
	switch {
	case c.prompt == "":
		return invalid("prompt", "missing_required_parameter", "Missing required parameter: 'prompt'.")
	case hasControl(c.model):
		return invalid("model", "invalid_value", "Invalid 'model': control characters.")
	}
	if c.model == "" {
		c.model = defaultModel
	}
	if c.seconds == "" {
		c.seconds = defaultSeconds
	} else if n, err := strconv.Atoi(c.seconds); err != nil || n < 1 || n > maxSeconds || strconv.Itoa(n) != c.seconds {
		return invalid("seconds", "invalid_value", fmt.Sprintf("Invalid 'seconds': %q is not a whole number of seconds from 1 to %d (OpenAI's: 4, 8, 12).", c.seconds, maxSeconds))
	}
	if c.size == "" {
		c.size = defaultSize
	} else if !sizeRe.MatchString(c.size) {
		return invalid("size", "invalid_value", fmt.Sprintf("Invalid 'size': %q is not WIDTHxHEIGHT (e.g. 720x1280).", c.size))
	}
	return nil
}

// text reads a text field of at most limit bytes of UTF-8.
func text(p io.Reader, limit int) (string, error) {
	b, err := io.ReadAll(io.LimitReader(p, int64(limit)+1))
	switch {
	case err != nil:
		return "", err
	case len(b) > limit:
		return "", badField("string_above_max_length", fmt.Sprintf("At most %d bytes.", limit))
	case !utf8.Valid(b):
		return "", badField("invalid_value", "Not valid UTF-8.")
	}
	return string(b), nil
}

// reference reads an uploaded reference image into a data: URI.
func reference(p io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(p, maxReference+1))
	switch {
	case err != nil:
		return "", err
	case len(b) > maxReference:
		return "", badField("file_too_large", fmt.Sprintf("input_reference: at most %d KiB uploaded (it travels inside the submission); give a larger image as input_reference[image_url].", maxReference>>10))
	}
	ct, err := imageType(b)
	if err != nil {
		return "", err
	}
	return "data:" + ct + ";base64," + base64.StdEncoding.EncodeToString(b), nil
}

// upload streams an uploaded reference image into files, and returns its
// reference.
func upload(w http.ResponseWriter, r *http.Request, files *face.Files, p io.Reader) (string, error) {
	br := bufio.NewReaderSize(p, 512)
	head, err := br.Peek(512)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	ct, err := imageType(head)
	if err != nil {
		return "", err
	}
	f, err := files.Put(r, w, "input_reference", "input_reference", ct, br)
	if err != nil {
		return "", err
	}
	return f.Ref(), nil
}

// imageType is the type of an image whose first bytes are head: JPEG,
// PNG or WebP, else an error.
func imageType(head []byte) (string, error) {
	ct := http.DetectContentType(head)
	switch ct {
	case "image/jpeg", "image/png", "image/webp":
		return ct, nil
	}
	return "", badField("invalid_file_format", "input_reference: a JPEG, PNG or WebP image, not "+ct+".")
}

// imageURL checks a reference image's URL.
func imageURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", badField("invalid_url", "input_reference[image_url]: an http(s) URL.")
	}
	return s, nil
}

// bodyError is the error of a body that could not be read.
func bodyError(err error) *face.Error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &face.Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Message: fmt.Sprintf("The body is larger than %d KiB.", maxBody>>10)}
	}
	return invalid("", "invalid_body", "The multipart body does not parse: "+err.Error())
}

// badField is the error of a field a helper read: the create names the
// field.
func badField(code, msg string) error {
	return &face.Error{Status: http.StatusBadRequest, Code: code, Message: msg}
}

func invalid(field, code, msg string) *face.Error {
	return &face.Error{Status: http.StatusBadRequest, Code: code, Field: field, Message: msg}
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}
