package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

// Standard Webhooks 1.0 headers.
const (
	headerWebhookID        = "webhook-id"
	headerWebhookTimestamp = "webhook-timestamp"
	headerWebhookSignature = "webhook-signature"
)

// Sign is the Standard Webhooks v1 signature of one attempt: HMAC-SHA256 of
// "<id>.<unix seconds>.<body>" with the decoded secret, base64, prefixed "v1,".
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, ts.Unix())
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// item is one event or notice as the webhook function sees it: its CloudEvents attributes
// (from the stored headers, or rebuilt from the body for an event stored before they were
// written) and the fields the filters read.
type item struct {
	id, ceType, subject, time string
	state                     domain.State
	body                      []byte
	// The event's annotations (domain.Annotate): an applied outcome has actionRequired (absent
	// from its JSON when false), a notice or another outcome has none.
	category       string
	inWindow       domain.Known
	actionRequired domain.Known
}

// itemOf reads a delivered message. The body is never changed: it is what is signed and sent.
func itemOf(msg function.Message) item {
	var b struct {
		ResourceID string       `json:"resourceId"`
		Outcome    string       `json:"outcome"`
		To         domain.State `json:"to"`
		Kind       string       `json:"kind"`
		State      domain.State `json:"state"`
		At         time.Time    `json:"at"`

		Category       string       `json:"category"`
		InWindow       domain.Known `json:"inWindow"`
		ActionRequired bool         `json:"actionRequired"`
	}
	_ = json.Unmarshal(msg.Data, &b) // a body that does not read is delivered unfiltered by state
	h := msg.Header
	it := item{
		id: h.Get(domain.HeaderCEID), ceType: h.Get(domain.HeaderCEType), subject: h.Get(domain.HeaderCESubject),
		time: h.Get(domain.HeaderCETime), body: msg.Data, state: b.To,
		category: b.Category, inWindow: b.InWindow,
	}
	if b.Kind == "" && domain.Outcome(b.Outcome) == domain.OutcomeApplied {
		it.actionRequired = domain.KnownAs(b.ActionRequired)
	}
	if b.Kind != "" {
		it.state = b.State
	}
	if it.id == "" {
		it.id = h.Get(domain.HeaderMsgID)
	}
	if it.id == "" {
		it.id = fmt.Sprintf("%s-%d", msg.Stream, msg.Seq)
	}
	if it.ceType == "" {
		if b.Kind != "" {
			it.ceType = domain.NoticeCEType(b.Kind)
		} else {
			it.ceType = domain.OutcomeCEType(domain.Outcome(b.Outcome))
		}
	}
	if it.subject == "" {
		it.subject = b.ResourceID
	}
	if it.time == "" {
		at := b.At
		if at.IsZero() {
			at = msg.Time
		}
		it.time = at.UTC().Format(time.RFC3339Nano)
	}
	return it
}

// wants reports whether the subscription's filters keep the item.
func (s *Subscription) wants(it item) bool {
	if len(s.Types) > 0 && !containsStr(s.Types, it.ceType) {
		return false
	}
	if len(s.States) > 0 && !containsState(s.States, it.state) {
		return false
	}
	if !s.prefix.CoversID(it.subject) {
		return false
	}
	return s.wantsAnnotations(it)
}

// wantsAnnotations applies the annotation filters: an item without the annotation a filter
// asks about (a notice, an announcement) does not pass it.
func (s *Subscription) wantsAnnotations(it item) bool {
	if len(s.Categories) > 0 && !containsStr(s.Categories, it.category) {
		return false
	}
	if s.InWindow != nil && it.inWindow != domain.KnownAs(*s.InWindow) {
		return false
	}
	if s.ActionRequired != nil && it.actionRequired != domain.KnownAs(*s.ActionRequired) {
		return false
	}
	return true
}

func containsStr(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func containsState(xs []domain.State, x domain.State) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// errRetry marks a failed delivery that the endpoint may accept later (README, Integrating: timeouts,
// connection errors, 408, 429, 5xx).
var errRetry = errors.New("delivery failed; will retry")

// sender posts deliveries of one subscription.
type sender struct {
	sub    *Subscription
	client *http.Client
	now    func() time.Time
}

func newSender(sub *Subscription, timeout time.Duration) *sender {
	return &sender{sub: sub, client: HTTPClient(sub, timeout), now: time.Now}
}

// HTTPClient is the client a subscription's deliveries go through: its own connections (a slow
// endpoint keeps no other's waiting for one), its TLS roots, one timeout per attempt, and no
// redirects (a redirect would re-send a signed body somewhere the subscription did not name).
func HTTPClient(sub *Subscription, timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = sub.tlsConfig()
	tr.MaxIdleConnsPerHost = DefaultConcurrency * 2
	if sub.publicOnly {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: dialPublicOnly}
		tr.DialContext = d.DialContext
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// send makes one attempt. It returns the HTTP status (0 when none came), nil on a 2xx, an error
// wrapping errRetry when a later attempt may succeed, and a permanent error otherwise.
func (s *sender) send(ctx context.Context, it item) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.sub.URL, bytes.NewReader(it.body))
	if err != nil {
		return 0, function.Permanent(fmt.Errorf("build request: %w", err))
	}
	h := req.Header
	// CloudEvents HTTP binary mode: the attributes as ce-* headers, the data as the body.
	h.Set("ce-specversion", domain.CESpecVersion)
	h.Set("ce-id", it.id)
	h.Set("ce-source", domain.CESource)
	h.Set("ce-type", it.ceType)
	if it.subject != "" {
		h.Set("ce-subject", it.subject)
	}
	h.Set("ce-time", it.time)
	h.Set("Content-Type", domain.ContentJSON)
	// Standard Webhooks: the id is the event's, the same on every attempt; the timestamp and
	// signature are of this attempt, so that a receiver's replay window accepts a late retry.
	ts := s.now()
	h.Set(headerWebhookID, it.id)
	h.Set(headerWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(headerWebhookSignature, Sign(s.sub.key, it.id, ts, it.body))
	h.Set("User-Agent", "maintsignals-webhook/1")

	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if errors.Is(err, errPrivateEndpoint) {
			return 0, function.Permanent(errPrivateEndpoint)
		}
		// Timeouts, refused and reset connections, TLS handshakes cut short: the endpoint may
		// come back. (A certificate that does not verify is retried too: it is usually being
		// rotated; the 24-hour budget bounds it.)
		return 0, fmt.Errorf("%w: %s", errRetry, scrub(err, s.sub.URL))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return c, nil
	case c == http.StatusRequestTimeout, c == http.StatusTooManyRequests, c >= 500:
		return c, fmt.Errorf("%w: HTTP %d", errRetry, c)
	default:
		return c, function.Permanent(fmt.Errorf("endpoint refused the delivery: HTTP %d", c))
	}
}

// scrub takes the endpoint's full URL (its path or query may hold a token) out of a client
// error.
func scrub(err error, rawURL string) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redactURL(rawURL)
	}
	return strings.ReplaceAll(err.Error(), rawURL, redactURL(rawURL))
}
