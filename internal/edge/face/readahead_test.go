package face

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
)

// The store reads exactly the body's bytes through the read-ahead, in
// any size of read, and then the body's end or its error.
func TestReadAheadReadsTheBodyAsItIs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, aheadPiece - 1, aheadPiece, aheadPiece + 1, 5*aheadPiece + 3} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(rng.IntN(256))
		}
		for _, size := range []int{1, 1000, aheadPiece, 3 * aheadPiece} {
			ra := newReadAhead(iotest.HalfReader(bytes.NewReader(body)))
			got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(ra, int64(n+1))))
			if size > 1 {
				ra = newReadAhead(iotest.HalfReader(bytes.NewReader(body)))
				got, err = io.ReadAll(readSize{ra, size})
			}
			require.NoError(t, err)
			require.Equal(t, body, got, "%d bytes read %d at a time", n, size)
			<-ra.done
		}
	}
	broken := errors.New("connection reset")
	ra := newReadAhead(io.MultiReader(bytes.NewReader(make([]byte, 3*aheadPiece/2)), iotest.ErrReader(broken)))
	got, err := io.ReadAll(ra)
	require.ErrorIs(t, err, broken)
	require.Len(t, got, 3*aheadPiece/2, "the bytes before the error")
}

// readSize reads at most size bytes a Read.
type readSize struct {
	r    io.Reader
	size int
}

func (r readSize) Read(p []byte) (int, error) { return r.r.Read(p[:min(len(p), r.size)]) }

// A store that stops early (a file past its limit) while the client has
// stopped sending: the read-ahead's goroutine is cut off by the read
// deadline, and the handler returns instead of waiting on the client.
func TestReadAheadStopsWhenTheStoreStops(t *testing.T) {
	returned := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		ra := newReadAhead(r.Body)
		_, err := io.ReadFull(ra, make([]byte, 1000))
		require.NoError(t, err)
		ra.finish(http.NewResponseController(w))
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}))
	defer srv.Close()
	pr, pw := io.Pipe()
	defer func() { _ = pw.Close() }()
	go func() {
		// A piece and a half, then nothing more: the body never ends.
		_, _ = pw.Write(make([]byte, 3*aheadPiece/2))
	}()
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, pr)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler waited on a stalled client")
	}
}
