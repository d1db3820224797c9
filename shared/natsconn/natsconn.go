// Package natsconn connects to NATS the way operators expect a NATS client to (server list,
// credentials, nkey seed, TLS files, the environment variables and flags of the nats CLI), and
// makes permission violations visible: NATS reports a publish to a denied subject only to the
// connection's asynchronous error handler, so a plain js.Publish waits for its whole timeout
// and then says "timeout". Conn.PublishMsg and Conn.Guard return a *PermissionError at once.
package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// PingInterval and PingMax are the client's liveness check of its server: one ping every
// PingInterval, and the connection is given up when PingMax are unanswered.
const (
	PingInterval = time.Second
	PingMax      = 2
)

// DefaultServer is where clients connect when neither a server nor NATS_URL is given.
const DefaultServer = "nats://127.0.0.1:4222"

// Errors.
var (
	// ErrInvalidOptions is wrapped by every option validation error.
	ErrInvalidOptions = errors.New("invalid NATS connection options")
	// ErrConnect is wrapped when the connection cannot be established.
	ErrConnect = errors.New("cannot connect to NATS")
)

// Options are the connection settings. The zero value connects to DefaultServer without
// credentials.
type Options struct {
	// Servers is a URL or a comma-separated list for a cluster (NATS_URL); a missing scheme
	// means nats://. A user and password go in the URL: nats://user:pass@host:4222.
	Servers string
	// Name is the connection name the server shows.
	Name string
	// CredsFile is a JWT credentials file (NATS_CREDS, --creds), for servers in operator mode.
	CredsFile string
	// NkeyFile is a file holding the user's nkey seed (NATS_NKEY, --nkey), for servers with
	// nkey users, as the configurations of infra/nats.
	NkeyFile string
	// CertFile and KeyFile are the client certificate and key for mutual TLS (NATS_CERT,
	// NATS_KEY, --tlscert, --tlskey).
	CertFile, KeyFile string
	// CAFile holds the CA certificates that verify the server (NATS_CA, --tlsca). Setting it
	// (or a client certificate) makes the client require TLS.
	CAFile string
	// InboxPrefix replaces "_INBOX" in reply subjects (NATS_INBOX_PREFIX, --inbox-prefix): a
	// server with the roles of infra/nats lets each role subscribe only to its own prefix,
	// natsconf.Role.InboxPrefix.
	InboxPrefix string
	// User and Password, or Token, authenticate where the server has such users (a NATS CLI
	// context may carry them; on the command line they go in the URL).
	User, Password, Token string
	// TLSFirst starts TLS before the NATS protocol's INFO (a server with handshake_first).
	TLSFirst bool
	// Timeout bounds the connection attempt to each server (default 5s).
	Timeout time.Duration
	// Logger receives asynchronous errors and connection events (default slog.Default()).
	Logger *slog.Logger
	// Extra nats.go options, applied after the ones above (for example nats.InProcessServer or
	// KeyPair). An ErrorHandler among them is replaced: the Conn needs its own.
	Extra []nats.Option
}

// Environment variables read by FromEnv: the names the nats CLI uses.
const (
	EnvURL         = "NATS_URL"
	EnvCreds       = "NATS_CREDS"
	EnvNkey        = "NATS_NKEY"
	EnvCert        = "NATS_CERT"
	EnvKey         = "NATS_KEY"
	EnvCA          = "NATS_CA"
	EnvInboxPrefix = "NATS_INBOX_PREFIX"
)

// FromEnv reads Options from the environment (getenv is os.Getenv, or a fake in tests).
func FromEnv(getenv func(string) string) Options {
	return Options{
		Servers:     getenv(EnvURL),
		CredsFile:   getenv(EnvCreds),
		NkeyFile:    getenv(EnvNkey),
		CertFile:    getenv(EnvCert),
		KeyFile:     getenv(EnvKey),
		CAFile:      getenv(EnvCA),
		InboxPrefix: getenv(EnvInboxPrefix),
	}
}

// FlagSet is what Flags needs of a flag set: both the standard library's *flag.FlagSet and
// pflag's (cobra's) have it.
type FlagSet interface {
	StringVar(p *string, name, value, usage string)
}

// Flags binds the credential and TLS flags of the nats CLI (--creds, --nkey, --tlscert,
// --tlskey, --tlsca, --inbox-prefix) to o; the current values (from FromEnv) are the defaults.
// The server list stays with the caller's own --server flag.
func (o *Options) Flags(fs FlagSet) {
	fs.StringVar(&o.CredsFile, "creds", o.CredsFile, "NATS user credentials file ($"+EnvCreds+")")
	fs.StringVar(&o.NkeyFile, "nkey", o.NkeyFile, "NATS user nkey seed file ($"+EnvNkey+")")
	fs.StringVar(&o.CertFile, "tlscert", o.CertFile, "TLS client certificate file, for mutual TLS ($"+EnvCert+")")
	fs.StringVar(&o.KeyFile, "tlskey", o.KeyFile, "TLS client key file ($"+EnvKey+")")
	fs.StringVar(&o.CAFile, "tlsca", o.CAFile, "CA certificates that verify the NATS server ($"+EnvCA+")")
	fs.StringVar(&o.InboxPrefix, "inbox-prefix", o.InboxPrefix, "reply subject prefix of your role, e.g. _INBOX_admin ($"+EnvInboxPrefix+")")
}

// NormalizeServers trims a comma-separated server list and adds nats:// where no scheme is
// given; an empty list is DefaultServer.
func NormalizeServers(servers string) string {
	var out []string
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return DefaultServer
	}
	return strings.Join(out, ",")
}

// NATSOptions validates o and returns its nats.go options (without the error handler that
// Connect installs, and without Extra).
func (o Options) NATSOptions() ([]nats.Option, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	opts := []nats.Option{nats.Timeout(timeout), nats.MaxReconnects(-1),
		// A server that stops answering (a cut link, an isolated host) is given up within
		// PingInterval*(PingMax+1), not nats.go's 2 minutes: a function on it then gives up the
		// messages it holds (shared/function, lease.go) and its partitions go to a live replica.
		nats.PingInterval(PingInterval), nats.MaxPingsOutstanding(PingMax),
		nats.ReconnectWait(500 * time.Millisecond), nats.ReconnectJitter(250*time.Millisecond, time.Second),
		// Nothing is kept to be sent on a later connection: a write either goes out on the
		// connection it was made for or fails, and is retried by whoever made it.
		nats.ReconnectBufSize(-1),
	}
	if o.Name != "" {
		opts = append(opts, nats.Name(o.Name))
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.NkeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: nkey seed file: %w", ErrInvalidOptions, err)
		}
		opts = append(opts, opt)
	}
	if o.CertFile != "" {
		opts = append(opts, nats.ClientCert(o.CertFile, o.KeyFile))
	}
	if o.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.CAFile))
	}
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	if o.User != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.TLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	return opts, nil
}

// check refuses options that cannot work, before any connection is tried: files that go
// together given alone, files that are not there, an inbox prefix that is not a subject.
func (o Options) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, a...))
	}
	if o.CredsFile != "" && o.NkeyFile != "" {
		return bad("use a credentials file or an nkey seed file, not both")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return bad("a client certificate needs its key and a key its certificate")
	}
	for _, f := range []struct{ what, path string }{
		{"credentials", o.CredsFile}, {"nkey seed", o.NkeyFile},
		{"TLS certificate", o.CertFile}, {"TLS key", o.KeyFile}, {"TLS CA", o.CAFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%w: %s file: %w", ErrInvalidOptions, f.what, err)
		}
	}
	if o.InboxPrefix != "" && !validPrefix(o.InboxPrefix) {
		return bad("inbox prefix %q: use subject tokens without wildcards, e.g. _INBOX_admin", o.InboxPrefix)
	}
	return nil
}

func validPrefix(p string) bool {
	for _, t := range strings.Split(p, ".") {
		if t == "" || strings.ContainsAny(t, "*> \t\r\n") {
			return false
		}
	}
	return true
}

// KeyPair authenticates with an nkey held in memory (for example a key `maintctl up`
// creates for its own in-process functions), where Options.NkeyFile reads a seed file.
func KeyPair(kp nkeys.KeyPair) (nats.Option, error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: nkey: %w", ErrInvalidOptions, err)
	}
	return nats.Nkey(pub, kp.Sign), nil
}

// Conn is a NATS connection whose permission violations reach the calls that caused them.
type Conn struct {
	NC *nats.Conn
	JS jetstream.JetStream

	log   *slog.Logger
	inbox string // the reply prefix, with its trailing dot

	mu     sync.Mutex
	guards map[*guard]struct{}
	// inboxErr is set when the server refused the subscription to the connection's replies:
	// every later request would time out, so every guard fails at once with it.
	inboxErr *PermissionError
}

// Connect connects with o until ctx ends.
func Connect(ctx context.Context, o Options) (*Conn, error) {
	opts, err := o.NATSOptions()
	if err != nil {
		return nil, err
	}
	c := &Conn{log: o.Logger, guards: map[*guard]struct{}{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.inbox = nats.InboxPrefix
	if o.InboxPrefix != "" {
		c.inbox = o.InboxPrefix + "."
	}
	opts = append(opts, o.Extra...)
	opts = append(opts,
		nats.ErrorHandler(c.asyncError),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				c.log.Warn("disconnected from NATS", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.log.Info("reconnected to NATS", "server", nc.ConnectedUrlRedacted())
		}),
	)
	servers := NormalizeServers(o.Servers)
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(servers, opts...)
		done <- result{nc, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		// nats.Connect takes no context: let it finish in the background and close it.
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("%w at %s: %w", ErrConnect, redact(servers), ctx.Err())
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w at %s: %w", ErrConnect, redact(servers), r.err)
	}
	c.NC = r.nc
	if c.JS, err = jetstream.New(r.nc); err != nil {
		r.nc.Close()
		return nil, fmt.Errorf("%w: jetstream: %w", ErrConnect, err)
	}
	return c, nil
}

// Close closes the connection.
func (c *Conn) Close() { c.NC.Close() }

// redact hides passwords of URLs in errors and logs.
func redact(servers string) string {
	parts := strings.Split(servers, ",")
	for i, s := range parts {
		scheme, rest, ok := strings.Cut(s, "://")
		if !ok {
			continue
		}
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
				parts[i] = scheme + "://" + user + ":xxxxx" + rest[at:]
			}
		}
	}
	return strings.Join(parts, ",")
}
