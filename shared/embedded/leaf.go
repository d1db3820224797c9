package embedded

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// leafReconnect is how soon a region tries the hub again after losing it: the hub's view of
// the region comes back within a few seconds of a healed link.
const leafReconnect = time.Second

// leafOptions sets the leafnode listener or remote of cfg on opts.
func leafOptions(opts *server.Options, cfg Config) error {
	if cfg.LeafListen != "" {
		host, port, err := splitHostPort(cfg.LeafListen)
		if err != nil {
			return err
		}
		if port == 0 {
			port = server.RANDOM_PORT
		}
		opts.LeafNode.Host, opts.LeafNode.Port = host, port
		opts.LeafNode.ReconnectInterval = leafReconnect
	}
	if cfg.LeafRemote == "" {
		return nil
	}
	u, err := ParseLeafURL(cfg.LeafRemote)
	if err != nil {
		return err
	}
	opts.LeafNode.ReconnectInterval = leafReconnect
	opts.LeafNode.Remotes = append(opts.LeafNode.Remotes, &server.RemoteLeafOpts{
		URLs: []*url.URL{u}, DenyImports: cfg.LeafDeny, DenyExports: cfg.LeafDeny,
	})
	return nil
}

// ParseLeafURL reads a hub's leafnode address: nats-leaf://host:port or nats://host:port (the
// same address either way), or host:port.
func ParseLeafURL(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "nats-leaf://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: hub URL %q: %w", ErrInvalidConfig, s, err)
	}
	switch {
	case u.Scheme != "nats-leaf" && u.Scheme != "nats":
		return nil, fmt.Errorf("%w: hub URL %q: want nats-leaf://host:port or nats://host:port", ErrInvalidConfig, s)
	case u.Hostname() == "" || u.Port() == "":
		return nil, fmt.Errorf("%w: hub URL %q: want host:port", ErrInvalidConfig, s)
	}
	u.Scheme = "nats-leaf"
	return u, nil
}

// LeafURL is the nats-leaf:// address of the leafnode listener, "" when the server has none.
func (s *Server) LeafURL() string {
	v, err := s.Varz(nil)
	if err != nil || v.LeafNode.Port <= 0 {
		return ""
	}
	return "nats-leaf://" + net.JoinHostPort(v.LeafNode.Host, strconv.Itoa(v.LeafNode.Port))
}
