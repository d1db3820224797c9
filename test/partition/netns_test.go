package partition

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"maintsignals/test/testenv"
)

// TestNet_CutAndHeal checks the harness itself: a server in a namespace is reachable from the
// test, unreachable (a timeout, not a refusal) while its link is cut, reachable again once
// healed, and nothing of the network is left after the test.
func TestNet_CutAndHeal(t *testing.T) {
	needSuite(t)
	var base string
	t.Run("net", func(t *testing.T) {
		n := NewNet(t)
		base = n.base
		h := n.AddHost("server")
		// Any TCP server will do: the nats-server binary is at hand.
		testenv.StartProc(t, "server", h.Command(natsBin, "-a", h.IP, "-p", "4222"))
		addr := h.IP + ":4222"
		waitDial(t, addr, 10*time.Second)

		h.Cut()
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			t.Fatal("a cut host accepted a connection")
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Errorf("dialing a cut host: %v, want a timeout (no reset)", err)
		}
		h.Heal()
		waitDial(t, addr, 10*time.Second)
	})
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	if base == "" {
		t.Fatal("no network was made")
	}
	if strings.Contains(string(out), base) || strings.Contains(string(links), base) {
		t.Errorf("left behind by %s:\n%s\n%s", base, out, links)
	}
}
