// Package client is the operator's and integrator's side of the messaging contract (README, Messaging contract):
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
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"maintsignals/shared/domain"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/store"
)

// DefaultServer is where clients connect when neither a server nor NATS_URL is given.
const DefaultServer = natsconn.DefaultServer

// publisher is what Send and PublishOnly publish commands through: a *natsconn.Conn, whose
// PublishMsg fails at once with a *natsconn.PermissionError when the server denies the
// subject, or, for a client made by New, the plain jetstream.JetStream.
type publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Client is a connection to the maintenance-signal streams and bucket.
type Client struct {
	NC *nats.Conn
	JS jetstream.JetStream
	// Conn is the permission-aware connection of a client made by Connect or FromConn; nil
	// for one made by New.
	Conn *natsconn.Conn

	ownConn bool
	log     *slog.Logger
	signer  nkeys.KeyPair // signs commands when set
	scopes  []domain.Scope
	pub     publisher // publishes commands: Conn when set, else JS

	mu sync.Mutex
	st *store.Store
}

// Options configures Connect and FromConn.
type Options struct {
	// Name is the connection name the server shows (default "maintctl").
	Name string
	// Timeout bounds the initial connection attempt to each server (default 5s).
	Timeout time.Duration
	// Logger receives connection events (default slog.Default()).
	Logger *slog.Logger
	// NATS are extra nats.go options (credentials, TLS, ...). An ErrorHandler among them is
	// replaced by the one that reports permission violations to the calls that caused them.
	NATS []nats.Option
	// Signer signs every command with its nkey (required where the command function demands
	// signed commands).
	Signer nkeys.KeyPair
	// Scopes confine the reads to these tenants (a customer user confined by the server
	// reads only through filters on them; README, Tenants). None: the whole fleet.
	Scopes []domain.Scope
}

// Connect connects to servers, one URL or a comma-separated list for a cluster (a missing
// scheme means nats://), with natsconn: a command the server does not let this user publish
// fails at once with a *natsconn.PermissionError. For credentials and TLS from files, flags
// and the environment, connect with natsconn.Connect and wrap the connection with FromConn.
func Connect(ctx context.Context, servers string, o Options) (*Client, error) {
	if o.Name == "" {
		o.Name = "maintctl"
	}
	conn, err := natsconn.Connect(ctx, natsconn.Options{
		Servers: servers,
		Name:    o.Name,
		Timeout: o.Timeout,
		Logger:  o.Logger,
		Extra:   o.NATS,
	})
	if err != nil {
		return nil, err
	}
	return FromConn(conn, o), nil
}

// FromConn makes a client of a natsconn connection (Name, Timeout and NATS of o are not
// used: the connection is made). Send and PublishOnly publish through conn.PublishMsg, and
// the reads and Guard fail at once on a permission violation. Close closes conn.
func FromConn(conn *natsconn.Conn, o Options) *Client {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Client{NC: conn.NC, JS: conn.JS, Conn: conn, ownConn: true, log: log, signer: o.Signer, pub: conn, scopes: domain.Disjoint(o.Scopes)}
}

// New wraps an existing connection (for example an in-process one). Close does not close it.
// Its permission violations reach only the connection's own error handler: a denied publish
// waits for the whole timeout. Prefer FromConn.
func New(nc *nats.Conn, log *slog.Logger) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Client{NC: nc, JS: js, log: log, pub: js}, nil
}

// NormalizeServers trims a comma-separated server list and adds nats:// where no scheme is
// given; an empty list is DefaultServer.
func NormalizeServers(servers string) string { return natsconn.NormalizeServers(servers) }

// Guard runs fn so that a permission violation of this connection on a subject filter
// matches (or on its replies) ends it at once with a *natsconn.PermissionError (see
// natsconn.Conn.Guard). Without a natsconn connection (New) it just runs fn.
func (c *Client) Guard(ctx context.Context, filter string, fn func(context.Context) error) error {
	if c.Conn == nil {
		return fn(ctx)
	}
	return c.Conn.Guard(ctx, filter, fn)
}

// jsAPI is the filter of the JetStream API requests that the reads make.
const jsAPI = "$JS.API.>"

// Close closes the connection if Connect opened it.
func (c *Client) Close() {
	if c.ownConn && c.NC != nil {
		c.NC.Close()
	}
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

// ErrNotPermitted is wrapped when the server does not let this user read what was asked (an
// entity outside a customer's scopes).
var ErrNotPermitted = errors.New("not permitted")

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

// Exists reports whether the entity has a record (it was ever seen): a record that holds only
// a refusal's fence does not count (domain.Record.FenceOnly).
func (e Entity) Exists() bool { return e.Revision != 0 && !e.Record.FenceOnly() }

// Tracked reports whether the entity is in the signal: it has a record, and no Forget took it
// out since.
func (e Entity) Tracked() bool { return e.Exists() && !e.Record.Forgotten() }

// Get reads the record of resourceID. An entity never seen is in state None, revision 0.
func (c *Client) Get(ctx context.Context, resourceID string) (Entity, error) {
	key, err := domain.Key(resourceID)
	if err != nil {
		return Entity{}, err
	}
	var (
		rec domain.Record
		rev uint64
	)
	err = c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		st, err := c.store(ctx)
		if err != nil {
			return err
		}
		if len(c.scopes) > 0 {
			// Confined: a direct get names the subject, which the server checks.
			if err := c.permits(resourceID, key); err != nil {
				return err
			}
			rec, rev, err = st.Peek(ctx, key)
			return err
		}
		rec, rev, err = st.Get(ctx, key)
		return err
	})
	if errors.Is(err, natsconn.ErrPermissionDenied) && len(c.scopes) == 0 {
		// A user confined to tenants may not ask the leader (the request names no subject
		// a permission could check): a direct get of the record's subject, which it may ask
		// of its own.
		err = c.Guard(ctx, jsAPI, func(ctx context.Context) error {
			st, err := c.store(ctx)
			if err == nil {
				rec, rev, err = st.Peek(ctx, key)
			}
			return err
		})
	}
	if errors.Is(err, natsconn.ErrPermissionDenied) {
		return Entity{}, fmt.Errorf("%w: %s: %w", ErrNotPermitted, resourceID, err)
	}
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
	return c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		st, err := c.store(ctx)
		if err != nil {
			return err
		}
		return st.Scan(ctx, func(e store.Entry, err error) error {
			return fn(Entity{Key: e.Key, Revision: e.Revision, Record: e.Record}, err)
		}, c.scopes...)
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
