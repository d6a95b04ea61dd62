package face

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// readAhead reads an upload's body in a goroutine of its own, a few full
// pieces ahead of the store: the socket's reads overlap the hashing and
// publishing of the pieces before them, where one goroutine would take
// turns at both. finish stops it before the handler goes on, so the body
// is never read by two at once, nor after the handler returns.
type readAhead struct {
	pieces chan piece
	free   chan []byte
	done   chan struct{}
	cur    []byte // the rest of the piece being read
	buf    []byte // the piece cur is in, given back once read
	err    error  // the body's end or error, once cur is read
}

type piece struct {
	b   []byte
	err error
}

// Read-ahead bounds: 3 pieces of 128 KiB an upload, what the store makes
// a chunk of.
const (
	aheadPiece = 128 << 10
	aheadDepth = 2
)

func newReadAhead(body io.Reader) *readAhead {
	ra := &readAhead{pieces: make(chan piece, aheadDepth), free: make(chan []byte, aheadDepth+1), done: make(chan struct{})}
	for range aheadDepth + 1 {
		ra.free <- make([]byte, aheadPiece)
	}
	go ra.fill(body)
	return ra
}

// fill reads body into the free pieces until it ends or fails, or no
// reader takes them any more.
func (ra *readAhead) fill(body io.Reader) {
	defer close(ra.done)
	for b := range ra.free {
		n, err := io.ReadFull(body, b)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		ra.pieces <- piece{b[:n], err}
		if err != nil {
			return
		}
	}
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.err != nil {
			return 0, ra.err
		}
		if ra.buf != nil {
			ra.free <- ra.buf[:cap(ra.buf)]
			ra.buf = nil
		}
		pc := <-ra.pieces
		ra.buf, ra.cur, ra.err = pc.b, pc.b, pc.err
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// finish waits for the reading goroutine to end: at once when the store
// read the body to its end; else the body's read is cut short (its
// deadline now, through rc) and what it read is dropped.
func (ra *readAhead) finish(rc *http.ResponseController) {
	if ra.err == nil {
		_ = rc.SetReadDeadline(time.Now())
		close(ra.free) // the goroutine takes no more pieces
		for done := false; !done; {
			select {
			case <-ra.pieces: // a piece no one reads: its send must not block
			case <-ra.done:
				done = true
			}
		}
	}
	<-ra.done
}
