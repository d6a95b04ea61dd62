package natstest

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Proxy is a TCP proxy on loopback in front of a server, which a test can
// make hold what the server sends: while held, a client's requests reach
// the server and are handled — a publish is stored — but their answers
// wait in the proxy until Release, as on a network that loses acks. A
// client that connects through it reaches the server at URL.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  bool
	freed *sync.Cond // broadcast on Release and on Close
	conns []net.Conn
	done  bool
	wg    sync.WaitGroup
	// sent counts the bytes clients sent the server.
	sent atomic.Int64
}

// NewProxy starts a proxy to target (host:port); it stops when the test
// ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{t: t, ln: ln, target: target}
	p.freed = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Hold keeps what the server sends from reaching the clients, until
// Release.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = true
}

// Release sends on what Hold kept, and what follows.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = false
	p.freed.Broadcast()
}

// Sent is how many bytes the clients have sent the server so far: a
// test sees a client send again.
func (p *Proxy) Sent() int64 { return p.sent.Load() }

// Close stops the proxy and its connections, and waits for them.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.done = true
	p.held = false
	p.freed.Broadcast()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		var d net.Dialer
		server, err := d.DialContext(context.Background(), "tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.conns = append(p.conns, client, server)
		p.wg.Add(2)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(countWriter{server, &p.sent}, client)
			_ = server.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.pipe(client, server)
			_ = client.Close()
		}()
	}
}

// pipe copies what server sends to client, each read waiting while the
// proxy holds.
func (p *Proxy) pipe(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held && !p.done {
				p.freed.Wait()
			}
			done := p.done
			p.mu.Unlock()
			if done {
				return
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// countWriter counts what it writes to w.
type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}
