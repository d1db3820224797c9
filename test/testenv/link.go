package testenv

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Link is a loopback TCP relay that a test can cut and heal, as a network link that goes down
// without closing anything: while it is cut, bytes in either direction wait (nothing is lost
// and nobody is told), and when it heals they arrive late, as TCP retransmits after an outage.
type Link struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	heal  chan struct{} // closed when a cut ends
	conns []net.Conn
	wg    sync.WaitGroup
}

// StartLink relays a free loopback port to target (host:port) until the test ends.
func StartLink(t testing.TB, target string) *Link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Link{ln: ln, target: target, heal: make(chan struct{})}
	close(l.heal)
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.close)
	return l
}

// URL is the nats:// URL of the relay.
func (l *Link) URL() string { return "nats://" + l.ln.Addr().String() }

// Cut stops every byte through the link until Heal.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cut {
		l.cut, l.heal = true, make(chan struct{})
	}
}

// Heal lets the bytes through again, the ones that waited first.
func (l *Link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		l.cut = false
		close(l.heal)
	}
}

// open waits while the link is cut.
func (l *Link) open() {
	l.mu.Lock()
	heal := l.heal
	l.mu.Unlock()
	<-heal
}

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.open() // a connection attempt across a cut link hangs
			u, err := net.DialTimeout("tcp", l.target, 2*time.Second)
			if err != nil {
				_ = c.Close()
				return
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, u)
			l.mu.Unlock()
			l.wg.Add(2)
			go l.pipe(u, c)
			go l.pipe(c, u)
		}()
	}
}

// pipe copies from src to dst, holding each chunk while the link is cut.
func (l *Link) pipe(dst, src net.Conn) {
	defer l.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.open()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			l.open() // the far end learns of a close only when the link is up
			return
		}
	}
}

func (l *Link) close() {
	_ = l.ln.Close()
	l.Heal()
	l.mu.Lock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}
