package web

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

// DefaultListen is where the view listens unless told otherwise: loopback only.
const DefaultListen = "127.0.0.1:8080"

// Defaults of the pages.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
	// DefaultDays is how many days the fleet page's time line shows.
	DefaultDays = 14
	// DefaultMaxStreams bounds the pages followed live at once (server-sent event streams).
	DefaultMaxStreams = 256
	// DefaultHistory is how many of an entity's latest outcome events and notices its page
	// shows.
	DefaultHistory = 200
)

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid web config")

// ErrInsecure is wrapped when the view would serve beyond loopback without either a bearer
// token or TLS that requires client certificates.
var ErrInsecure = errors.New("refusing to serve the web view beyond loopback without --web-token-file, --web-tokens or TLS with client certificates (--web-tls-cert, --web-tls-key, --web-client-ca)")

// Config configures the web view. Zero fields take the defaults.
type Config struct {
	// Listen is host:port (default DefaultListen). On any address but loopback, TokenFile,
	// TokensFile or ClientCA is required.
	Listen string
	// Listener, when set, is served instead of listening on Listen (which then only names
	// the address for the loopback rule and the logs): `maintctl up` binds first, to tell a
	// taken port from other errors.
	Listener net.Listener
	// TokenFile holds the bearer token every request must carry (Authorization: Bearer, or
	// the cookie set by the sign-in form); its surrounding white space is ignored.
	TokenFile string
	// TokensFile holds the customer tokens (a JSON array of TokenEntry): a request that
	// carries one of them sees the entities of its holder's scopes only. With it, every request
	// needs a token, the operator's or a customer's.
	TokensFile string
	// TLSCert and TLSKey serve HTTPS; ClientCA, with them, requires a client certificate
	// signed by one of its authorities.
	TLSCert, TLSKey, ClientCA string

	// StuckAfter is how long an update may run before it counts as stuck (default
	// domain.DefaultStuckAfter).
	StuckAfter time.Duration
	PageSize   int
	Days       int
	MaxStreams int
	History    int
	// Retry is how long to wait before looking again for a bucket that does not exist yet,
	// or after a read failed (default 5s).
	Retry time.Duration
	// Coalesce is how long a live page waits after a change for more before it is told to
	// refresh (default 200ms), and at least how long between two refreshes.
	Coalesce time.Duration
	// PageTokenKey seals the API's page tokens (32 bytes; default: made when the view
	// starts). Replicas behind one address share it, so that a walk may move between them.
	PageTokenKey []byte
	// PageKeyFile, when set, holds a secret (at least 16 characters) whose SHA-256 is the
	// PageTokenKey: the file the replicas share.
	PageKeyFile string
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger

	tokens tokens
	tls    *tls.Config
}

func (c Config) withDefaults() (Config, error) {
	if err := cmp.Or(
		function.NotNegative(ErrInvalidConfig, "StuckAfter", c.StuckAfter),
		function.NotNegative(ErrInvalidConfig, "PageSize", c.PageSize),
		function.NotNegative(ErrInvalidConfig, "Days", c.Days),
		function.NotNegative(ErrInvalidConfig, "MaxStreams", c.MaxStreams),
		function.NotNegative(ErrInvalidConfig, "History", c.History),
		function.NotNegative(ErrInvalidConfig, "Retry", c.Retry),
		function.NotNegative(ErrInvalidConfig, "Coalesce", c.Coalesce),
	); err != nil {
		return c, err
	}
	c.Listen = cmp.Or(c.Listen, DefaultListen)
	if c.Listener != nil {
		c.Listen = c.Listener.Addr().String()
	}
	c.StuckAfter = cmp.Or(c.StuckAfter, domain.DefaultStuckAfter)
	c.PageSize = min(cmp.Or(c.PageSize, DefaultPageSize), MaxPageSize)
	c.Days = cmp.Or(c.Days, DefaultDays)
	c.MaxStreams = cmp.Or(c.MaxStreams, DefaultMaxStreams)
	c.History = cmp.Or(c.History, DefaultHistory)
	c.Retry = cmp.Or(c.Retry, 5*time.Second)
	c.Coalesce = cmp.Or(c.Coalesce, 200*time.Millisecond)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = time.Now
	}
	if err := c.loadSecrets(); err != nil {
		return c, err
	}
	loopback, err := isLoopback(c.Listen)
	if err != nil {
		return c, fmt.Errorf("%w: Listen: %w", ErrInvalidConfig, err)
	}
	if !loopback && !c.tokens.any() && c.ClientCA == "" {
		return c, fmt.Errorf("%w (listening on %s)", ErrInsecure, c.Listen)
	}
	return c, nil
}

// loadSecrets reads the token files and the TLS files.
func (c *Config) loadSecrets() error {
	if err := c.loadTokens(); err != nil {
		return err
	}
	if err := c.loadPageKey(); err != nil {
		return err
	}
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return fmt.Errorf("%w: TLSCert and TLSKey go together", ErrInvalidConfig)
	case c.ClientCA != "" && c.TLSCert == "":
		return fmt.Errorf("%w: ClientCA needs TLSCert and TLSKey", ErrInvalidConfig)
	case c.TLSCert == "":
		return nil
	}
	cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return fmt.Errorf("%w: TLSCert, TLSKey: %w", ErrInvalidConfig, err)
	}
	c.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCA != "" {
		pem, err := os.ReadFile(c.ClientCA)
		if err != nil {
			return fmt.Errorf("%w: ClientCA: %w", ErrInvalidConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%w: ClientCA: no certificate in %s", ErrInvalidConfig, c.ClientCA)
		}
		c.tls.ClientCAs, c.tls.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return nil
}

// loadTokens reads the operator's token and the customers' tokens.
func (c *Config) loadTokens() error {
	c.tokens = tokens{}
	operator := ""
	if c.TokenFile != "" {
		var err error
		if operator, err = readOperatorToken(c.TokenFile); err != nil {
			return err
		}
		c.tokens.add(operator, nil)
	}
	if c.TokensFile == "" {
		return nil
	}
	entries, err := LoadTokens(c.TokensFile)
	if err != nil {
		return err
	}
	for i, e := range entries {
		if operator != "" && subtle.ConstantTimeCompare([]byte(e.Token), []byte(operator)) == 1 {
			return fmt.Errorf("%w: %w: %s: %w", ErrInvalidConfig, ErrInvalidTokens, c.TokensFile,
				domain.InvalidParameter(fmt.Sprintf("[%d].token", i), "of %s is the operator's token (TokenFile): a customer token must be its own", e.Name))
		}
		c.tokens.add(e.Token, e.customer())
	}
	return nil
}

// isLoopback reports whether host:port listens on loopback only: a loopback IP or
// "localhost". An empty host listens on every interface.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback(), nil
}

// Check reports what New would refuse in cfg (a wrong setting, a missing file, an address
// beyond loopback without a token or client certificates), so that a process can refuse it
// before it starts anything.
func Check(cfg Config) error {
	_, err := cfg.withDefaults()
	return err
}

// loadPageKey reads PageKeyFile into PageTokenKey.
func (c *Config) loadPageKey() error {
	if c.PageKeyFile == "" {
		return nil
	}
	b, err := os.ReadFile(c.PageKeyFile)
	if err != nil {
		return fmt.Errorf("%w: PageKeyFile: %w", ErrInvalidConfig, err)
	}
	secret := strings.TrimSpace(string(b))
	if len(secret) < 16 {
		return fmt.Errorf("%w: PageKeyFile: a secret of at least 16 characters", ErrInvalidConfig)
	}
	key := sha256.Sum256([]byte(secret))
	c.PageTokenKey = key[:]
	return nil
}
