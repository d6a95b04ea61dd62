package formdata_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/textproto"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/formdata"
)

const boundary = "b0undary"

// part is what a reader made of one part.
type part struct {
	Header   textproto.MIMEHeader
	FormName string
	FileName string
	Body     string
}

// parse reads every part of body with this package's reader, each Read
// asking for size bytes.
func parse(body io.Reader, size int) ([]part, error) {
	r := formdata.NewReader(body, boundary)
	var parts []part
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return parts, err
		}
		var b bytes.Buffer
		if _, err := io.CopyBuffer(&b, struct{ io.Reader }{p}, make([]byte, size)); err != nil {
			return parts, err
		}
		parts = append(parts, part{Header: p.Header, FormName: p.FormName(), FileName: p.FileName(), Body: b.String()})
	}
}

// parseStd reads body as mime/multipart does, the reference.
func parseStd(body []byte) ([]part, error) {
	r := multipart.NewReader(bytes.NewReader(body), boundary)
	var parts []part
	for {
		p, err := r.NextPart()
		if err == io.EOF { //nolint:errorlint // the end; a wrapped EOF is an error
			return parts, nil
		}
		if err != nil {
			return parts, err
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return parts, err
		}
		parts = append(parts, part{Header: p.Header, FormName: p.FormName(), FileName: p.FileName(), Body: string(b)})
	}
}

// form writes parts as an HTTP client would.
func form(t testing.TB, preamble string, parts ...part) []byte {
	var b bytes.Buffer
	b.WriteString(preamble)
	w := multipart.NewWriter(&b)
	require.NoError(t, w.SetBoundary(boundary))
	for _, p := range parts {
		pw, err := w.CreatePart(p.Header)
		require.NoError(t, err)
		_, err = pw.Write([]byte(p.Body))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

func disposition(name, file string) textproto.MIMEHeader {
	v := `form-data; name="` + name + `"`
	if file != "" {
		v += `; filename="` + file + `"`
	}
	return textproto.MIMEHeader{"Content-Disposition": {v}}
}

// The parts of a form as a client writes it: the same as mime/multipart
// reads, whatever the pieces the body arrives in and the reads ask for,
// content that nearly holds the delimiter included.
func TestReadsWhatMimeMultipartReads(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), formdata.BufferSize/8) // two buffers
	tricky := "a\r\n--b0undar\r\n--b0undaryX\r\n--b0undary-x\r\n-" + string(big) + "\r\n--b0"
	bodies := map[string][]byte{
		"one file": form(t, "", part{Header: disposition("content", "dir/cat.png"), Body: "PNG bytes"}),
		"file and metadata": form(t, "a preamble\r\n",
			part{Header: disposition("content", "cat.png"), Body: tricky},
			part{Header: disposition("metadata", ""), Body: `{"a":1}`}),
		"empty parts":       form(t, "", part{Header: disposition("a", "")}, part{Header: textproto.MIMEHeader{}}, part{Header: disposition("c", ""), Body: "\r\n"}),
		"no parts":          []byte("--" + boundary + "--\r\n"),
		"epilogue":          append(form(t, "", part{Header: disposition("a", ""), Body: "x"}), "\r\nafter the end"...),
		"padded boundary":   []byte("--" + boundary + " \t\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--" + boundary + "--"),
		"not a disposition": form(t, "", part{Header: textproto.MIMEHeader{"Content-Disposition": {"attachment; name=a"}}, Body: "x"}),
	}
	for name, body := range bodies {
		want, err := parseStd(body)
		require.NoError(t, err, name)
		for _, read := range []struct {
			name string
			r    func([]byte) io.Reader
		}{
			{"whole", func(b []byte) io.Reader { return bytes.NewReader(b) }},
			{"a byte at a time", func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
			{"in halves", func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }},
		} {
			for _, size := range []int{1, 7, 128 << 10} {
				got, err := parse(read.r(body), size)
				require.NoError(t, err, "%s, %s, reads of %d", name, read.name, size)
				require.Equal(t, want, got, "%s, %s, reads of %d", name, read.name, size)
			}
		}
	}
}

// A body cut short, a boundary line with something after it, headers
// without their end or over the bound: an error, never a part that
// silently ends early.
func TestRefusesMalformedBodies(t *testing.T) {
	whole := form(t, "", part{Header: disposition("content", "a.bin"), Body: "0123456789"})
	for name, body := range map[string]string{
		"no delimiter at all":       "just bytes",
		"cut in the content":        string(whole[:len(whole)-20]),
		"a boundary line with more": "--" + boundary + "\r\n\r\nbody\r\n--" + boundary + " x\r\n\r\nmore\r\n--" + boundary + "--",
		"headers over the bound":    "--" + boundary + "\r\nX: " + strings.Repeat("a", formdata.MaxHeaderBytes) + "\r\n\r\nbody\r\n--" + boundary + "--",
		"a malformed header":        "--" + boundary + "\r\n no name\r\n\r\nbody\r\n--" + boundary + "--",
	} {
		_, err := parse(strings.NewReader(body), 4096)
		require.Error(t, err, name)
		_, stdErr := parseStd([]byte(body))
		if name != "headers over the bound" {
			require.Error(t, stdErr, "mime/multipart refuses it too: %s", name)
		}
	}
	// mime/multipart takes headers cut short for the body's end.
	_, err := parse(strings.NewReader("--"+boundary+"\r\nContent-Disposition: form-data; name=a\r\n"), 4096)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "headers cut short")
	_, err = parse(strings.NewReader("--"+boundary+"\r\nX: "+strings.Repeat("a", formdata.MaxHeaderBytes)+"\r\n\r\n"), 4096)
	require.ErrorIs(t, err, formdata.ErrHeaderTooLarge)
}

// The body's own error (a bound passed, a connection reset) is the one
// a read answers, wherever it comes: in a part's content, its headers or
// a boundary line.
func TestPassesOnTheBodysError(t *testing.T) {
	whole := form(t, "", part{Header: disposition("content", "a.bin"), Body: strings.Repeat("x", 1000)}, part{Header: disposition("b", ""), Body: "y"})
	reset := errors.New("connection reset")
	for cut := 0; cut < len(whole); cut += 7 {
		body := io.MultiReader(bytes.NewReader(whole[:cut]), iotest.ErrReader(reset))
		_, err := parse(body, 64)
		require.ErrorIs(t, err, reset, "cut at %d", cut)
	}
}

// Random forms with content made of the delimiter's pieces read as
// mime/multipart reads them, 2,000 of them.
func TestRandomFormsMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"\r", "\n", "\r\n", "-", "--", "--" + boundary, "\r\n--" + boundary[:4], "\r\n--" + boundary + "x", "b0", "a", strings.Repeat("z", 1000)}
	for range 2000 {
		var parts []part
		for range rng.IntN(4) {
			var body strings.Builder
			for range rng.IntN(30) {
				body.WriteString(pieces[rng.IntN(len(pieces))])
			}
			parts = append(parts, part{Header: disposition("f", "x.bin"), Body: body.String()})
		}
		// The content may hold a real delimiter, making a form of other
		// parts, or none: both readers read the same, or both refuse.
		body := form(t, "", parts...)
		want, stdErr := parseStd(body)
		got, err := parse(iotest.HalfReader(bytes.NewReader(body)), 1+rng.IntN(64))
		if stdErr != nil || err != nil {
			require.Equal(t, stdErr != nil, err != nil, "mime/multipart: %v; formdata: %v; %q", stdErr, err, body)
			continue
		}
		require.Equal(t, want, got, "%q", body)
	}
}

// FuzzAgainstMimeMultipart: any body with CRLF line ends (the ones HTTP
// clients send) reads as mime/multipart reads it, or both refuse it; no
// body panics.
func FuzzAgainstMimeMultipart(f *testing.F) {
	f.Add(form(f, "", part{Header: disposition("content", "a.png"), Body: "x\r\n--b0undaryy"}))
	f.Add([]byte("--" + boundary + "\r\n\r\n\r\n--" + boundary + "--"))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := parse(bytes.NewReader(body), 5)
		if bytes.Contains(bytes.ReplaceAll(body, []byte("\r\n"), nil), []byte("\n")) ||
			bytes.Contains(bytes.ToLower(body), []byte("content-transfer-encoding")) || len(body) > formdata.MaxHeaderBytes {
			return // mime/multipart reads bare LF lines and decodes quoted-printable; Pollux's reader does neither
		}
		want, stdErr := parseStd(body)
		if stdErr == nil && errors.Is(err, io.ErrUnexpectedEOF) {
			// A body cut short in a part's headers: mime/multipart takes
			// it for the end, Pollux's reader refuses it; the parts
			// before are the same.
			require.Equal(t, want, got)
			return
		}
		if stdErr != nil || err != nil {
			require.Equal(t, stdErr != nil, err != nil, "mime/multipart: %v; formdata: %v", stdErr, err)
			return
		}
		require.Equal(t, want, got)
	})
}

// BenchmarkRead reads a 50 MB file part as the Replicate face does (into
// 128 KiB chunks), through this reader and through mime/multipart.
func BenchmarkRead(b *testing.B) {
	body := form(b, "", part{Header: disposition("content", "a.bin"), Body: string(make([]byte, 50<<20))})
	chunk := make([]byte, 128<<10)
	read := func(b *testing.B, next func(io.Reader) (io.Reader, error)) {
		b.SetBytes(50 << 20)
		for b.Loop() {
			p, err := next(bytes.NewReader(body))
			require.NoError(b, err)
			for err == nil {
				_, err = io.ReadFull(p, chunk)
			}
		}
	}
	b.Run("formdata", func(b *testing.B) {
		read(b, func(r io.Reader) (io.Reader, error) { return formdata.NewReader(r, boundary).NextPart() })
	})
	b.Run("mime-multipart", func(b *testing.B) {
		read(b, func(r io.Reader) (io.Reader, error) { return multipart.NewReader(r, boundary).NextPart() })
	})
}
