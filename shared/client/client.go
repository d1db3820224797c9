// Package client is the operator's and integrator's side of the messaging contract (SPEC §3):
// send a command and wait for its own outcome event, read a record, every record, the history
// of an entity, and watch outcome events live. maintctl is built on it; tests and other tools
// can use it as well.
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// DefaultServer is where clients connect when neither a server nor NATS_URL is given.
const DefaultServer = "nats://127.0.0.1:4222"

// ErrConnect is wrapped by connection failures.
var ErrConnect = errors.New("cannot connect to NATS")

// Client is a connection to the maintenance-signal streams and bucket.
type Client struct {
	NC *nats.Conn
	JS jetstream.JetStream

	ownConn bool
	log     *slog.Logger
	signer  nkeys.KeyPair // signs commands when set

	mu       sync.Mutex
	st       *store.Store
	asyncErr error // the last asynchronous error (permission violations surface only here)
}

// Options configures Connect.
type Options struct {
	// Name is the connection name the server shows (default "maintctl").
	Name string
	// Timeout bounds the initial connection attempt to each server (default 5s).
	Timeout time.Duration
	// Logger receives connection events (default slog.Default()).
	Logger *slog.Logger
	// NATS are extra nats.go options (credentials, TLS, ...).
	NATS []nats.Option
	// Signer signs every command with its nkey (required where the command function demands
	// signed commands).
	Signer nkeys.KeyPair
}

// Connect connects to servers, one URL or a comma-separated list for a cluster. A missing
// scheme means nats://.
func Connect(ctx context.Context, servers string, o Options) (*Client, error) {
	if o.Name == "" {
		o.Name = "maintctl"
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	servers = NormalizeServers(servers)
	c := &Client{log: o.Logger, ownConn: true, signer: o.Signer}
	opts := append([]nats.Option{
		nats.Name(o.Name),
		nats.Timeout(o.Timeout),
		nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.mu.Lock()
			c.asyncErr = err
			c.mu.Unlock()
			o.Logger.Warn("nats asynchronous error", "error", err)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				o.Logger.Warn("disconnected from NATS", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			o.Logger.Info("reconnected to NATS", "server", nc.ConnectedUrlRedacted())
		}),
	}, o.NATS...)
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
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("%w at %s: %w", ErrConnect, servers, ctx.Err())
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w at %s: %w", ErrConnect, servers, r.err)
	}
	c.NC = r.nc
	js, err := jetstream.New(r.nc)
	if err != nil {
		r.nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	c.JS = js
	return c, nil
}

// New wraps an existing connection (for example an in-process one). Close does not close it.
func New(nc *nats.Conn, log *slog.Logger) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Client{NC: nc, JS: js, log: log}, nil
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

// Close closes the connection if Connect opened it.
func (c *Client) Close() {
	if c.ownConn && c.NC != nil {
		c.NC.Close()
	}
}

// lastAsyncErr returns the last asynchronous error of the connection, if any.
func (c *Client) lastAsyncErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asyncErr
}

func (c *Client) store(ctx context.Context) (*store.Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st != nil {
		return c.st, nil
	}
	st, err := store.Open(ctx, c.JS)
	if err != nil {
		return nil, notProvisioned(err)
	}
	c.st = st
	return st, nil
}

// ErrNotProvisioned is wrapped when a stream or the bucket does not exist.
var ErrNotProvisioned = errors.New("streams and bucket are not provisioned (run `maintctl provision`, or `maintctl up` for a local stack)")

func notProvisioned(err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("%w: %w", ErrNotProvisioned, err)
	}
	return err
}

// Entity is the current record of one entity as read from the bucket.
type Entity struct {
	Key string
	// Revision is the record's revision in the bucket; 0 for an entity never seen.
	Revision uint64
	Record   domain.Record
}

// Exists reports whether the entity has a record (it was ever seen).
func (e Entity) Exists() bool { return e.Revision != 0 }

// Get reads the record of resourceID. An entity never seen is in state None, revision 0.
func (c *Client) Get(ctx context.Context, resourceID string) (Entity, error) {
	key, err := domain.Key(resourceID)
	if err != nil {
		return Entity{}, err
	}
	st, err := c.store(ctx)
	if err != nil {
		return Entity{}, err
	}
	rec, rev, err := st.Get(ctx, key)
	if err != nil {
		return Entity{}, err
	}
	if rev == 0 && rec.ResourceID == "" {
		rec.ResourceID = resourceID
	}
	return Entity{Key: key, Revision: rev, Record: rec}, nil
}

// Scan calls fn for every record in the bucket, in one streaming pass (see store.Scan). A
// record that does not decode reaches fn with an error wrapping store.ErrCorruptRecord.
func (c *Client) Scan(ctx context.Context, fn func(Entity, error) error) error {
	st, err := c.store(ctx)
	if err != nil {
		return err
	}
	return st.Scan(ctx, func(e store.Entry, err error) error {
		return fn(Entity{Key: e.Key, Revision: e.Revision, Record: e.Record}, err)
	})
}

// NewCommandID returns a fresh command id: prefix, the UTC time and random hex, for example
// "maintctl-20250401T020000Z-3f9a1c2b7d4e". It is a valid id for any prefix of up to 90
// characters of [A-Za-z0-9_.:-].
func NewCommandID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	if prefix == "" {
		prefix = "cmd"
	}
	return prefix + "-" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}
