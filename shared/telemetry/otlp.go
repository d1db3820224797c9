package telemetry

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/klauspost/compress/gzip"
)

// Emissions are pushed as OTLP requests built by their caller (the emitter builds them from the
// records, without the SDK's intermediate data model), on a client of their own that reads the
// same environment variables as the SDK's exporters: endpoint, headers, timeout, compression
// and TLS files, metrics-specific variables first.

// ErrPartialSuccess is returned when the collector accepted a request but rejected some of
// its points.
var ErrPartialSuccess = errors.New("collector rejected points")

// pusher sends one request, retrying transient failures until ctx ends.
type pusher interface {
	push(ctx context.Context, req *colmetricpb.ExportMetricsServiceRequest) error
	close() error
}

// target is where emissions go and how.
type target struct {
	url      *url.URL // the endpoint URL; for HTTP the full metrics URL
	headers  map[string]string
	tls      *tls.Config // nil: plaintext
	compress bool
	timeout  time.Duration // bound of one attempt
}

// envFirst returns the first non-empty of the metrics-specific and the general variable of
// the OTLP exporters (OTEL_EXPORTER_OTLP_METRICS_<name>, OTEL_EXPORTER_OTLP_<name>).
func envFirst(name string) string {
	return firstNonEmpty(os.Getenv("OTEL_EXPORTER_OTLP_METRICS_"+name), os.Getenv("OTEL_EXPORTER_OTLP_"+name))
}

// readTarget reads the target of mode (OTLP gRPC or HTTP) from cfg and the environment, as
// the SDK's exporters do: Config.Endpoint and OTEL_EXPORTER_OTLP_ENDPOINT are base URLs (over
// HTTP, /v1/metrics is appended), OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is used as it is.
func readTarget(cfg Config, mode Mode) (target, error) {
	t := target{headers: map[string]string{}, compress: true, timeout: 10 * time.Second}
	raw, base := cfg.Endpoint, true
	if raw == "" {
		if raw = os.Getenv(EnvMetricsEndpoint); raw != "" {
			base = false
		} else {
			raw = os.Getenv(EnvEndpoint)
		}
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return t, fmt.Errorf("%w: OTLP endpoint %q: not a URL with a host", ErrInvalidConfig, raw)
	}
	if mode == ModeOTLPHTTP && base {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/metrics"
	}
	t.url = u
	for _, kv := range strings.Split(envFirst("HEADERS"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			continue
		}
		if dv, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
			v = dv
		}
		t.headers[strings.ToLower(strings.TrimSpace(k))] = v
	}
	switch c := strings.ToLower(envFirst("COMPRESSION")); c {
	case "", "gzip":
	case "none":
		t.compress = false
	default:
		return t, fmt.Errorf("%w: OTLP compression %q (gzip or none)", ErrInvalidConfig, c)
	}
	if ms := envFirst("TIMEOUT"); ms != "" {
		n, err := strconv.Atoi(ms)
		if err != nil || n <= 0 {
			return t, fmt.Errorf("%w: OTLP timeout %q: milliseconds", ErrInvalidConfig, ms)
		}
		t.timeout = time.Duration(n) * time.Millisecond
	}
	if u.Scheme == "https" {
		if t.tls, err = readTLS(); err != nil {
			return t, err
		}
	}
	return t, nil
}

// readTLS builds the client TLS configuration from the certificate variables; a CA file
// replaces the system roots, as in the SDK's exporters.
func readTLS() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := envFirst("CERTIFICATE"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%w: OTLP certificate: %w", ErrInvalidConfig, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: OTLP certificate %s: no PEM certificate", ErrInvalidConfig, ca)
		}
	}
	cert, key := envFirst("CLIENT_CERTIFICATE"), envFirst("CLIENT_KEY")
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%w: OTLP client certificate: %w", ErrInvalidConfig, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// retryWait is the wait before retry n (from 0) of a transient failure: quickRetry's
// schedule; the caller's deadline ends the attempts.
func retryWait(n int) time.Duration {
	d := quickRetry.InitialInterval << min(n, 8)
	return min(d, quickRetry.MaxInterval)
}

// retrying runs attempt until it succeeds, fails for good (retry false), or ctx ends; a
// transient failure is tried again after its own wait (the server's) or retryWait.
func retrying(ctx context.Context, attempt func(context.Context) (retry bool, wait time.Duration, err error)) error {
	for n := 0; ; n++ {
		retry, wait, err := attempt(ctx)
		if err == nil || !retry {
			return err
		}
		if wait <= 0 {
			wait = retryWait(n)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// partial turns a response's partial success into an error.
func partial(resp *colmetricpb.ExportMetricsServiceResponse) error {
	if ps := resp.GetPartialSuccess(); ps != nil && ps.GetRejectedDataPoints() > 0 {
		return fmt.Errorf("%w: %d points: %s", ErrPartialSuccess, ps.GetRejectedDataPoints(), ps.GetErrorMessage())
	}
	return nil
}

// grpcPusher pushes over OTLP/gRPC.
type grpcPusher struct {
	conn   *grpc.ClientConn
	client colmetricpb.MetricsServiceClient
	t      target
	md     metadata.MD
}

func newGRPCPusher(t target, reconnectMax time.Duration) (*grpcPusher, error) {
	creds := insecure.NewCredentials()
	if t.tls != nil {
		creds = credentials.NewTLS(t.tls)
	}
	conn, err := grpc.NewClient(t.url.Host,
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent("maintsignals-emission"),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay: min(time.Second, reconnectMax), Multiplier: backoff.DefaultConfig.Multiplier,
				Jitter: backoff.DefaultConfig.Jitter, MaxDelay: reconnectMax,
			},
			MinConnectTimeout: 5 * time.Second,
		}))
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP gRPC client: %w", err)
	}
	return &grpcPusher{conn: conn, client: colmetricpb.NewMetricsServiceClient(conn), t: t, md: metadata.New(t.headers)}, nil
}

func (p *grpcPusher) push(ctx context.Context, req *colmetricpb.ExportMetricsServiceRequest) error {
	ctx = metadata.NewOutgoingContext(ctx, p.md)
	opts := []grpc.CallOption{grpc.ForceCodec(otlpCodec{})}
	if p.t.compress {
		opts = append(opts, grpc.UseCompressor(gzipName))
	}
	return retrying(ctx, func(ctx context.Context) (bool, time.Duration, error) {
		actx, cancel := context.WithTimeout(ctx, p.t.timeout)
		defer cancel()
		resp, err := p.client.Export(actx, req, opts...)
		if err == nil {
			return false, 0, partial(resp)
		}
		retry, wait := grpcRetryable(err)
		return retry, wait, err
	})
}

// grpcRetryable applies the OTLP specification's retryable codes; ResourceExhausted only
// with the server's RetryInfo, whose delay is then kept.
func grpcRetryable(err error) (bool, time.Duration) {
	s := status.Convert(err)
	switch s.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.Unavailable, codes.DataLoss:
		return true, 0
	case codes.ResourceExhausted:
		for _, d := range s.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				return true, ri.GetRetryDelay().AsDuration()
			}
		}
	}
	return false, 0
}

func (p *grpcPusher) close() error { return p.conn.Close() }

// httpPusher pushes over OTLP/HTTP with protobuf bodies.
type httpPusher struct {
	client *http.Client
	t      target
	bufs   sync.Pool // *bytes.Buffer, bodies and the marshalled request
	gz     sync.Pool // *gzip.Writer
}

func newHTTPPusher(t target) *httpPusher {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = t.tls
	return &httpPusher{client: &http.Client{Transport: tr}, t: t}
}

func (p *httpPusher) buffer() *bytes.Buffer {
	if b, ok := p.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// body marshals req (and gzips it) into a pooled buffer, released by the caller.
func (p *httpPusher) body(req *colmetricpb.ExportMetricsServiceRequest) (*bytes.Buffer, error) {
	raw := p.buffer()
	b, err := marshalRequest(raw.Bytes(), req)
	if err != nil {
		p.bufs.Put(raw)
		return nil, err
	}
	raw = bytes.NewBuffer(b)
	if !p.t.compress {
		return raw, nil
	}
	out := p.buffer()
	zw, ok := p.gz.Get().(*gzip.Writer)
	if !ok {
		zw, _ = gzip.NewWriterLevel(out, gzipLevel)
	} else {
		zw.Reset(out)
	}
	_, err = zw.Write(raw.Bytes())
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	p.gz.Put(zw)
	p.bufs.Put(raw)
	if err != nil {
		p.bufs.Put(out)
		return nil, fmt.Errorf("telemetry: gzip: %w", err)
	}
	return out, nil
}

func (p *httpPusher) push(ctx context.Context, req *colmetricpb.ExportMetricsServiceRequest) error {
	body, err := p.body(req)
	if err != nil {
		return err
	}
	defer p.bufs.Put(body)
	return retrying(ctx, func(ctx context.Context) (bool, time.Duration, error) {
		return p.attempt(ctx, body.Bytes())
	})
}

func (p *httpPusher) attempt(ctx context.Context, body []byte) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, p.t.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.t.url.String(), bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("telemetry: request: %w", err)
	}
	for k, v := range p.t.headers {
		hr.Header.Set(k, v)
	}
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("User-Agent", "maintsignals-emission")
	if p.t.compress {
		hr.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		return true, 0, fmt.Errorf("telemetry: post: %w", err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		var out colmetricpb.ExportMetricsServiceResponse
		if len(rb) > 0 && proto.Unmarshal(rb, &out) == nil {
			return false, 0, partial(&out)
		}
		return false, 0, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		wait := time.Duration(0)
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		return true, wait, fmt.Errorf("telemetry: collector answered %s", resp.Status)
	}
	return false, 0, fmt.Errorf("telemetry: collector answered %s: %s", resp.Status, bytes.TrimSpace(rb))
}

func (p *httpPusher) close() error {
	p.client.CloseIdleConnections()
	return nil
}
