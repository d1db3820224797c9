// Package otlpreceiver is an in-process OTLP metrics receiver for tests: it accepts exports over
// gRPC and over HTTP (/v1/metrics, protobuf or JSON, gzip or not), decodes the real protobuf,
// records every request with its size, and can be stopped and restarted on the same ports to
// play a collector that goes away.
//
// Like a default Collector, the gRPC side refuses messages over 4 MiB (after decompression), so
// a test that passes against it passes against a Collector with default settings.
package otlpreceiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed gRPC requests
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Protocols, as named by OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	GRPC = "grpc"
	HTTP = "http/protobuf"
)

// DefaultMaxRecvMsgSize is the gRPC server's and the Collector's default limit.
const DefaultMaxRecvMsgSize = 4 << 20

// maxHTTPBody bounds an HTTP request body after decompression (the Collector's default is
// 20 MiB; larger here so that a test measures rather than refuses).
const maxHTTPBody = 64 << 20

// ErrStopped is returned by Restart on a closed receiver.
var ErrStopped = errors.New("otlpreceiver: closed")

// Export is one export request as received.
type Export struct {
	// Seq numbers the requests in order of arrival, from 1.
	Seq      int
	Protocol string
	At       time.Time
	// Size is the request's protobuf size in bytes, uncompressed: what a receiver's message
	// size limit applies to.
	Size int
	// WireSize is the payload size as received (compressed when Encoding is "gzip").
	WireSize int
	Encoding string
	// DataPoints counts the data points of every metric of the request.
	DataPoints int
	// Request is the decoded request; nil when the receiver keeps no payloads.
	Request *colmetricpb.ExportMetricsServiceRequest
}

// Option configures a receiver.
type Option func(*Receiver)

// WithoutPayloads keeps only the sizes and counts of requests, not their content (for
// benchmarks that send many points).
func WithoutPayloads() Option { return func(r *Receiver) { r.dropPayloads = true } }

// WithHost makes the receiver listen on host instead of 127.0.0.1 (an address of a test
// network that processes in other network namespaces reach).
func WithHost(host string) Option { return func(r *Receiver) { r.host = host } }

// Receiver is a running OTLP metrics receiver. Its methods are safe for concurrent use.
type Receiver struct {
	dropPayloads bool
	noDecode     bool // WithoutDecoding
	host         string
	counts       *tickCounts // WithTickCounts

	grpcAddr string
	httpAddr string

	mu      sync.Mutex
	exports []Export
	seq     int
	changed chan struct{} // closed and replaced on every recorded export
	delay   time.Duration
	running bool
	closed  bool
	grpcSrv *grpc.Server
	httpSrv *http.Server
	wg      sync.WaitGroup
}

// New starts a receiver on two free loopback ports.
func New(opts ...Option) (*Receiver, error) {
	r := &Receiver{changed: make(chan struct{}), host: "127.0.0.1"}
	for _, o := range opts {
		o(r)
	}
	gl, err := net.Listen("tcp", net.JoinHostPort(r.host, "0"))
	if err != nil {
		return nil, fmt.Errorf("otlpreceiver: listen grpc: %w", err)
	}
	hl, err := net.Listen("tcp", net.JoinHostPort(r.host, "0"))
	if err != nil {
		_ = gl.Close()
		return nil, fmt.Errorf("otlpreceiver: listen http: %w", err)
	}
	r.grpcAddr, r.httpAddr = gl.Addr().String(), hl.Addr().String()
	r.mu.Lock()
	r.serve(gl, hl)
	r.mu.Unlock()
	return r, nil
}

// Start is New for tests: it fails tb on error and closes the receiver at cleanup.
func Start(tb testing.TB, opts ...Option) *Receiver {
	tb.Helper()
	r, err := New(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Close)
	return r
}

// serve starts both servers on the listeners; r.mu is held.
func (r *Receiver) serve(gl, hl net.Listener) {
	if r.noDecode {
		r.grpcSrv = r.sink()
	} else {
		r.grpcSrv = grpc.NewServer(grpc.MaxRecvMsgSize(DefaultMaxRecvMsgSize), grpc.StatsHandler(wireSizes{}))
		colmetricpb.RegisterMetricsServiceServer(r.grpcSrv, &grpcService{r: r})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/metrics", r.handleHTTP)
	r.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	r.running = true
	gs, hs := r.grpcSrv, r.httpSrv
	r.wg.Add(2)
	go func() { defer r.wg.Done(); _ = gs.Serve(gl) }()
	go func() { defer r.wg.Done(); _ = hs.Serve(hl) }()
}

// GRPCEndpoint is the gRPC endpoint URL (plaintext), for OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) GRPCEndpoint() string { return "http://" + r.grpcAddr }

// HTTPEndpoint is the HTTP base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends
// /v1/metrics).
func (r *Receiver) HTTPEndpoint() string { return "http://" + r.httpAddr }

// HTTPMetricsURL is the full metrics URL, for OTEL_EXPORTER_OTLP_METRICS_ENDPOINT.
func (r *Receiver) HTTPMetricsURL() string { return r.HTTPEndpoint() + "/v1/metrics" }

// Endpoint is the endpoint URL for protocol GRPC or HTTP.
func (r *Receiver) Endpoint(protocol string) string {
	if protocol == GRPC {
		return r.GRPCEndpoint()
	}
	return r.HTTPEndpoint()
}

// SetEnv points the OTLP exporter environment variables of a test at this receiver.
func (r *Receiver) SetEnv(tb testing.TB, protocol string) {
	tb.Helper()
	tb.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.Endpoint(protocol))
	tb.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
}

// SetDelay holds every request for d before answering (a slow collector); 0 answers at once.
func (r *Receiver) SetDelay(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = d
}

// Stop shuts both servers down and drops their connections, as a collector that goes away:
// exports fail until Restart.
func (r *Receiver) Stop() {
	r.mu.Lock()
	if !r.running {
		r.mu.Unlock()
		return
	}
	r.running = false
	gs, hs := r.grpcSrv, r.httpSrv
	r.mu.Unlock()
	gs.Stop()
	_ = hs.Close()
	r.wg.Wait()
}

// Restart serves again on the same ports after Stop.
func (r *Receiver) Restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return ErrStopped
	case r.running:
		return nil
	}
	gl, err := net.Listen("tcp", r.grpcAddr)
	if err != nil {
		return fmt.Errorf("otlpreceiver: listen grpc again: %w", err)
	}
	hl, err := net.Listen("tcp", r.httpAddr)
	if err != nil {
		_ = gl.Close()
		return fmt.Errorf("otlpreceiver: listen http again: %w", err)
	}
	r.serve(gl, hl)
	return nil
}

// Close stops the receiver for good.
func (r *Receiver) Close() {
	r.Stop()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// Exports returns the requests received so far, oldest first.
func (r *Receiver) Exports() []Export {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Export(nil), r.exports...)
}

// Len is the number of requests received so far (the Seq of the latest).
func (r *Receiver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

// Reset forgets the requests received so far (Seq keeps counting).
func (r *Receiver) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exports = nil
}

// Await returns the first request with Seq > after for which match is true (nil matches
// any), waiting for it until ctx is done.
func (r *Receiver) Await(ctx context.Context, after int, match func(Export) bool) (Export, error) {
	for {
		r.mu.Lock()
		for _, e := range r.exports {
			if e.Seq > after && (match == nil || match(e)) {
				r.mu.Unlock()
				return e, nil
			}
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Export{}, fmt.Errorf("otlpreceiver: no matching export after #%d: %w", after, ctx.Err())
		}
	}
}

// Next waits for the next request to arrive.
func (r *Receiver) Next(ctx context.Context) (Export, error) { return r.Await(ctx, r.Len(), nil) }

// record stores one decoded request and wakes waiters.
func (r *Receiver) record(protocol string, req *colmetricpb.ExportMetricsServiceRequest, size, wire int, encoding string) {
	e := Export{Protocol: protocol, At: time.Now(), Size: size, WireSize: wire, Encoding: encoding, DataPoints: countPoints(req)}
	if !r.dropPayloads {
		e.Request = req
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts != nil {
		r.counts.count(req)
	}
	r.appendLocked(e)
}

// recordSize stores one request taken without decoding.
func (r *Receiver) recordSize(protocol string, size, wire int, encoding string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.appendLocked(Export{Protocol: protocol, At: time.Now(), Size: size, WireSize: wire, Encoding: encoding})
}

// appendLocked numbers e, keeps it and wakes waiters; r.mu is held.
func (r *Receiver) appendLocked(e Export) {
	r.seq++
	e.Seq = r.seq
	r.exports = append(r.exports, e)
	close(r.changed)
	r.changed = make(chan struct{})
}

// hold applies the configured delay, or gives up when the client does.
func (r *Receiver) hold(ctx context.Context) error {
	r.mu.Lock()
	d := r.delay
	r.mu.Unlock()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type grpcService struct {
	colmetricpb.UnimplementedMetricsServiceServer
	r *Receiver
}

func (s *grpcService) Export(ctx context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	if err := s.r.hold(ctx); err != nil {
		return nil, err
	}
	size, wire, encoding := proto.Size(req), 0, ""
	if w, ok := ctx.Value(wireKey{}).(*wireInfo); ok {
		wire, encoding = w.size, w.encoding
	}
	if wire == 0 {
		wire = size
	}
	s.r.record(GRPC, req, size, wire, encoding)
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

// wireSizes is a gRPC stats handler that notes the compression and compressed size of each
// request, which the service method itself cannot see. Both events come before the method
// runs, on the goroutine of the stream.
type wireSizes struct{}

type (
	wireKey  struct{}
	wireInfo struct {
		size     int
		encoding string
	}
)

func (wireSizes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, wireKey{}, &wireInfo{})
}

func (wireSizes) HandleRPC(ctx context.Context, s stats.RPCStats) {
	w, ok := ctx.Value(wireKey{}).(*wireInfo)
	if !ok {
		return
	}
	switch s := s.(type) {
	case *stats.InHeader:
		if !s.Client && s.Compression != "identity" {
			w.encoding = s.Compression
		}
	case *stats.InPayload:
		if !s.Client {
			w.size = s.CompressedLength
		}
	}
}

func (wireSizes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (wireSizes) HandleConn(context.Context, stats.ConnStats)                       {}

func (r *Receiver) handleHTTP(w http.ResponseWriter, req *http.Request) {
	if err := r.hold(req.Context()); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	wire, err := io.ReadAll(io.LimitReader(req.Body, maxHTTPBody+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body := wire
	encoding := req.Header.Get("Content-Encoding")
	switch encoding {
	case "", "identity":
		encoding = ""
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(wire))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body, err = io.ReadAll(io.LimitReader(zr, maxHTTPBody+1))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	default:
		http.Error(w, "unsupported Content-Encoding "+encoding, http.StatusUnsupportedMediaType)
		return
	}
	if len(body) > maxHTTPBody {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	var msg colmetricpb.ExportMetricsServiceRequest
	contentType := req.Header.Get("Content-Type")
	if contentType == "application/json" {
		err = protojson.Unmarshal(body, &msg)
	} else {
		err = proto.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.record(HTTP, &msg, proto.Size(&msg), len(wire), encoding)
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}
