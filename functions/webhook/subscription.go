package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"syscall"

	"maintsignals/shared/domain"
	"maintsignals/shared/subscription"
)

// Subscription is one integrator's endpoint and what it wants (README, Integrating).
type Subscription struct {
	// Name identifies the subscription: its durable progress (consumer webhook-<name>) and its
	// dead letters. Renaming a subscription starts a new one.
	Name string `json:"name"`
	URL  string `json:"url"`
	// Secret is the Standard Webhooks signing secret, "whsec_" + base64. Never logged.
	Secret string `json:"secret"`
	// Types are the ce-type values delivered; empty delivers every type.
	Types []string `json:"types,omitempty"`
	// States are the resulting states delivered (an event's "to", a notice's "state"); empty
	// delivers every state.
	States []domain.State `json:"states,omitempty"`
	// ResourcePrefix keeps events whose resource ID lies under it: a resource-ID prefix that
	// ends at a path segment, compared without regard to case (domain.Prefix).
	ResourcePrefix string `json:"resourcePrefix,omitempty"`
	// Categories, InWindow and ActionRequired filter on the events' annotations
	// (domain.Annotate): the categories delivered ("planned", "unplanned"; empty: any), and,
	// when set, the inWindow and actionRequired values delivered. An item without the
	// annotation (a notice, an announcement) does not pass a filter on it.
	Categories     []string `json:"categories,omitempty"`
	InWindow       *bool    `json:"inWindow,omitempty"`
	ActionRequired *bool    `json:"actionRequired,omitempty"`
	// CAFile, when set, is the only authority an HTTPS endpoint's certificate is checked against;
	// otherwise the system roots (extended by SSL_CERT_FILE) are.
	CAFile string `json:"caFile,omitempty"`

	key    []byte
	roots  *x509.CertPool
	prefix domain.Prefix // ResourcePrefix read
	// publicOnly refuses connections to addresses that are not public (a self-service
	// subscription's).
	publicOnly bool
}

// String never shows the secret, so that a subscription printed by mistake leaks nothing.
func (s Subscription) String() string {
	return fmt.Sprintf("subscription %s → %s", s.Name, redactURL(s.URL))
}

// LogValue keeps the secret out of structured logs too.
func (s Subscription) LogValue() slog.Value { return slog.StringValue(s.String()) }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ErrInvalidSubscription is wrapped by every subscriptions-file error.
var ErrInvalidSubscription = errors.New("invalid subscription")

// LoadFile reads and checks a subscriptions file: a JSON array of subscriptions.
func LoadFile(path string) ([]Subscription, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("subscriptions: %w", err)
	}
	return Parse(b)
}

// Parse reads and checks subscriptions from JSON. Unknown fields are refused, so that a
// misspelt filter does not silently deliver everything.
func Parse(b []byte) ([]Subscription, error) {
	var subs []Subscription
	if err := domain.DecodeKnown(b, &subs); err != nil {
		return nil, fmt.Errorf("%w: subscriptions file must be a JSON array of subscriptions: %w", ErrInvalidSubscription, err)
	}
	seen := map[string]bool{}
	for i := range subs {
		s := &subs[i]
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("%w: subscription %d (%q): %w", ErrInvalidSubscription, i, s.Name, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("%w: subscription name %q used twice", ErrInvalidSubscription, s.Name)
		}
		seen[s.Name] = true
	}
	return subs, nil
}

func (s *Subscription) check() error {
	if !nameRE.MatchString(s.Name) {
		return errors.New("name must be 1-64 of [A-Za-z0-9_-]")
	}
	return s.checkFields()
}

// checkFields checks and reads everything but the name.
func (s *Subscription) checkFields() error {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("url must be an absolute http(s) URL, got %q", redactURL(s.URL))
	}
	if s.key, err = subscription.DecodeSecret(s.Secret); err != nil {
		return err
	}
	f := subscription.Filters{Types: s.Types, States: s.States, Categories: s.Categories}
	if err := f.CheckFilters(); err != nil {
		return err
	}
	if s.ResourcePrefix != "" {
		if s.prefix, err = domain.ParsePrefixLoose(s.ResourcePrefix); err != nil {
			return fmt.Errorf("resourcePrefix: %w", err)
		}
	}
	if s.roots, err = rootsFor(s.CAFile); err != nil {
		return err
	}
	return nil
}

// rootsFor is the pool HTTPS endpoints are verified against: the CA file alone when given,
// else the system roots plus SSL_CERT_FILE (Go reads that variable instead of the system
// bundle; here it adds to it).
func rootsFor(caFile string) (*x509.CertPool, error) {
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %s: no PEM certificate in it", caFile)
		}
		return pool, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		if pem, err := os.ReadFile(f); err == nil {
			pool.AppendCertsFromPEM(pem)
		}
	}
	return pool, nil
}

func (s *Subscription) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}
}

// redactURL keeps only the scheme and host of an endpoint: its path or query may hold a token.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host
}

// Key is the decoded signing secret.
func (s Subscription) Key() []byte { return s.key }

// fromRecord is the subscription of a self-service record with its secret: its delivery name,
// its scope as its prefix, verified against roots (nil: the system roots) and never a CA file
// of the function's file system; unless private, its connections reach public addresses only.
func fromRecord(rec subscription.Record, secret string, roots *x509.CertPool, private bool) (*Subscription, error) {
	s := &Subscription{
		Name: rec.Delivery, URL: rec.URL, Secret: secret, ResourcePrefix: rec.Scope,
		Types: rec.Types, States: rec.States, Categories: rec.Categories, InWindow: rec.InWindow, ActionRequired: rec.ActionRequired,
		publicOnly: !private,
	}
	if rej := subscription.CheckURL(rec.URL); rej != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSubscription, rec.Name, rej)
	}
	if err := s.checkFields(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSubscription, rec.Name, err)
	}
	if roots != nil {
		s.roots = roots
	}
	return s, nil
}

// errPrivateEndpoint is why a self-service subscription's connection is refused.
var errPrivateEndpoint = errors.New("the endpoint's address is loopback, private, link-local or shared: a self-service subscription may reach public addresses only (the webhook function's --allow-private-endpoints lifts this)")

// sharedSpace is the carrier-grade NAT range (RFC 6598), private in all but name.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// dialPublicOnly refuses, as it dials, an address that is not public: checked on the address
// connected to, so that a name that resolves to a private address is refused too.
func dialPublicOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q", errPrivateEndpoint, address)
	}
	ip := ap.Addr().Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsUnspecified() || sharedSpace.Contains(ip) {
		return errPrivateEndpoint
	}
	return nil
}
