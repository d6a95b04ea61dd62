// Package formdata reads a multipart/form-data body part by part, each
// part's bytes streamed in large pieces.
//
// It reads what mime/multipart reads, for the bodies HTTP clients send
// (CRLF line ends), and differs in one way: mime/multipart scans a part
// for its boundary 4 KiB at a time, which costs an upload of 50 MB some
// twelve thousand reads; this reader scans a buffer of BufferSize, so a
// face storing an upload as it arrives reads it in pieces the size the
// network delivers. The parts' headers are bounded (MaxHeaderBytes), so
// an untrusted body cannot grow them.
package formdata

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/textproto"
	"path/filepath"
	"strings"
)

const (
	// BufferSize is how much of the body is read ahead, and the most a
	// part's Read returns at once.
	BufferSize = 256 << 10
	// MaxHeaderBytes bounds one part's header block.
	MaxHeaderBytes = 16 << 10
)

// ErrHeaderTooLarge is a part whose headers pass MaxHeaderBytes.
var ErrHeaderTooLarge = errors.New("formdata: a part's headers are over 16 KiB")

// Reader reads the parts of one body in order.
type Reader struct {
	br    *bufio.Reader
	delim []byte // "\r\n--" + boundary: every delimiter, the first included
	cur   *Part  // the part being read; the preamble before the first
	ready int    // buffered bytes known to be the current part's
	done  bool
	err   error
}

// NewReader reads the parts of r, a multipart body with boundary.
func NewReader(r io.Reader, boundary string) *Reader {
	// The CRLF before the first delimiter is optional; supplying one
	// makes every delimiter the same, and the preamble a part skipped.
	rd := &Reader{
		br:    bufio.NewReaderSize(io.MultiReader(strings.NewReader("\r\n"), r), BufferSize),
		delim: []byte("\r\n--" + boundary),
	}
	rd.cur = &Part{r: rd}
	return rd
}

// Part is one part of a body; its bytes are read through Read, until the
// next delimiter.
type Part struct {
	Header textproto.MIMEHeader
	r      *Reader
	eof    bool
	begun  bool

	disposition string
	params      map[string]string // nil until parsed
}

// NextPart skips what is left of the current part and answers the next
// one, or io.EOF after the last.
func (r *Reader) NextPart() (*Part, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.done {
		return nil, io.EOF
	}
	for {
		if _, err := io.Copy(io.Discard, r.cur); err != nil {
			return nil, r.fail(err)
		}
		// The delimiter is consumed: "--" closes the body; else optional
		// whitespace and a CRLF start the next part's headers. In the
		// preamble, a line that only starts like a delimiter is skipped.
		line, err := r.br.ReadSlice('\n')
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, r.fail(err)
		}
		rest, final := bytes.CutPrefix(line, []byte("--"))
		rest = bytes.TrimLeft(rest, " \t")
		switch {
		case final && (errors.Is(err, io.EOF) && len(rest) == 0 || err == nil && string(rest) == "\r\n"):
			r.done = true
			return nil, io.EOF
		case !final && err == nil && string(rest) == "\r\n":
		case r.cur.Header == nil && err == nil:
			r.cur = &Part{r: r}
			continue
		default:
			return nil, r.fail(fmt.Errorf("formdata: a boundary line is malformed: %q", truncate(line)))
		}
		break
	}
	h, err := r.header()
	if err != nil {
		return nil, r.fail(err)
	}
	r.cur = &Part{Header: h, r: r}
	return r.cur, nil
}

// header reads a part's header block, at most MaxHeaderBytes: its lines
// up to the first empty one, a line ending as textproto ends one (CRLF,
// or a bare LF).
func (r *Reader) header() (textproto.MIMEHeader, error) {
	block, err := r.br.Peek(MaxHeaderBytes)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	end := -1
	for pos := 0; end < 0; {
		i := bytes.IndexByte(block[pos:], '\n')
		if i < 0 {
			if len(block) < MaxHeaderBytes {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, ErrHeaderTooLarge
		}
		if line := block[pos : pos+i+1]; string(line) == "\n" || string(line) == "\r\n" {
			end = pos + i + 1
		}
		pos += i + 1
	}
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(block[:end]))).ReadMIMEHeader()
	if err != nil {
		return nil, fmt.Errorf("formdata: a part's headers: %w", err)
	}
	_, _ = r.br.Discard(end)
	return h, nil
}

func (r *Reader) fail(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	r.err = err
	return err
}

// Read reads the part's bytes; io.EOF at its delimiter, which it consumes.
func (p *Part) Read(b []byte) (int, error) {
	if p.eof {
		return 0, io.EOF
	}
	if len(b) == 0 {
		return 0, nil
	}
	r := p.r
	if !p.begun {
		// The CRLF that ends the headers may be the delimiter's too: an
		// empty part written tersely, which mime/multipart reads.
		p.begun = true
		dash := r.delim[2:]
		buf, perr := r.br.Peek(len(dash) + 2)
		if perr != nil && !errors.Is(perr, io.EOF) {
			r.err = perr
			return 0, perr
		}
		if bytes.HasPrefix(buf, dash) && after(buf[len(dash):], perr != nil) == +1 {
			_, _ = r.br.Discard(len(dash))
			p.eof = true
			return 0, io.EOF
		}
	}
	for r.ready == 0 {
		if r.err != nil {
			return 0, r.err
		}
		// Enough bytes to decide on a delimiter and the two after it;
		// more, when they have arrived.
		_, perr := r.br.Peek(len(r.delim) + 2)
		if perr != nil && !errors.Is(perr, io.EOF) {
			r.err = perr // the body's own error (a bound passed, a reset)
			return 0, perr
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		n, found := scan(buf, r.delim, perr != nil)
		switch {
		case n > 0:
			r.ready = n
		case found:
			_, _ = r.br.Discard(len(r.delim))
			p.eof = true
			return 0, io.EOF
		case perr != nil:
			r.err = io.ErrUnexpectedEOF
			return 0, r.err
		}
	}
	buf, _ := r.br.Peek(min(r.ready, len(b)))
	n := copy(b, buf)
	_, _ = r.br.Discard(n)
	r.ready -= n
	return n, nil
}

// scan answers how many bytes of buf are the part's for sure, and
// whether a delimiter follows them at once. A delimiter counts when what
// comes after it is "--", whitespace or a line end, as mime/multipart
// has it; atEOF says buf is all that is left.
func scan(buf, delim []byte, atEOF bool) (int, bool) {
	from := 0
	for {
		i := bytes.Index(buf[from:], delim)
		if i < 0 {
			// The tail may be the start of a delimiter still arriving.
			safe := len(buf) - len(delim) + 1
			if atEOF {
				safe = len(buf)
			}
			return max(safe, from), false
		}
		i += from
		switch after(buf[i+len(delim):], atEOF) {
		case +1:
			return i, i == 0
		case 0: // not known yet: the bytes before it are the part's
			return i, false
		}
		from = i + 1
	}
}

// after judges the bytes after a delimiter: +1 it ends a part, -1 it is
// the part's own content, 0 too few bytes to tell.
func after(rest []byte, atEOF bool) int {
	if len(rest) == 0 {
		if atEOF {
			return +1
		}
		return 0
	}
	switch c := rest[0]; c {
	case ' ', '\t', '\r', '\n':
		return +1
	case '-':
		if len(rest) == 1 {
			if atEOF {
				return -1
			}
			return 0
		}
		if rest[1] == '-' {
			return +1
		}
	}
	return -1
}

// FormName is the part's name in its Content-Disposition ("" when it is
// not form-data).
func (p *Part) FormName() string {
	p.parseDisposition()
	if p.disposition != "form-data" {
		return ""
	}
	return p.params["name"]
}

// FileName is the part's filename in its Content-Disposition, without a
// directory (RFC 7578, 4.2).
func (p *Part) FileName() string {
	p.parseDisposition()
	if name := p.params["filename"]; name != "" {
		return filepath.Base(name)
	}
	return ""
}

func (p *Part) parseDisposition() {
	if p.params != nil {
		return
	}
	var err error
	p.disposition, p.params, err = mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		p.params = map[string]string{}
	}
}

// Close skips the rest of the part.
func (p *Part) Close() error {
	_, err := io.Copy(io.Discard, p)
	return err
}

func truncate(b []byte) []byte {
	return b[:min(len(b), 64)]
}
