package fault

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tap is a loopback TCP relay in front of the OTLP receiver, one per emitter process: it
// notes when its process last sent bytes, which tells which replica is exporting right now
// (the processes' periodic metrics export only once a minute, so within a test every request
// through a tap is an emission).
type tap struct {
	ln     net.Listener
	target string
	last   atomic.Int64 // unix nanoseconds of the last bytes from the client

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// startTap relays 127.0.0.1:free to target (host:port) until the test ends.
func startTap(t *testing.T, target string) *tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tap{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// endpoint is the URL for OTEL_EXPORTER_OTLP_ENDPOINT (plaintext gRPC).
func (p *tap) endpoint() string { return "http://" + p.ln.Addr().String() }

// sentWithin reports whether the client sent anything in the last d.
func (p *tap) sentWithin(d time.Duration) bool {
	last := p.last.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < d
}

func (p *tap) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(u, noteWrites{c, &p.last})
			_ = u.Close()
		}()
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(c, u)
			_ = c.Close()
		}()
	}
}

func (p *tap) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// noteWrites is a reader that stamps the time of every read that brought bytes.
type noteWrites struct {
	r    io.Reader
	last *atomic.Int64
}

func (n noteWrites) Read(b []byte) (int, error) {
	k, err := n.r.Read(b)
	if k > 0 {
		n.last.Store(time.Now().UnixNano())
	}
	return k, err
}
