package otlpreceiver

import (
	"fmt"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// WithoutDecoding makes the gRPC side take requests without decoding them (like
// WithoutPayloads, and DataPoints stays 0): only their sizes are recorded. A benchmark whose
// receiver shares the machine with what it measures then spends next to nothing on it, as a
// collector on a machine of its own would.
func WithoutDecoding() Option {
	return func(r *Receiver) { r.dropPayloads, r.noDecode = true, true }
}

// sinkCodec is the gRPC codec of a receiver that does not decode: an incoming request is
// counted, a response is marshalled as usual.
type sinkCodec struct{}

func (sinkCodec) Name() string { return "proto" }

func (sinkCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("otlpreceiver: cannot marshal %T", v)
	}
	return proto.Marshal(m)
}

func (sinkCodec) Unmarshal(data []byte, v any) error {
	if f, ok := v.(*rawRequest); ok {
		f.size = len(data)
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("otlpreceiver: cannot unmarshal into %T", v)
	}
	return proto.Unmarshal(data, m)
}

// rawRequest is a request taken without decoding: its size.
type rawRequest struct{ size int }

// sink is the gRPC server of a receiver that does not decode: every call is an export.
func (r *Receiver) sink() *grpc.Server {
	return grpc.NewServer(grpc.MaxRecvMsgSize(DefaultMaxRecvMsgSize), grpc.StatsHandler(wireSizes{}), grpc.ForceServerCodec(sinkCodec{}),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			var req rawRequest
			if err := stream.RecvMsg(&req); err != nil {
				return err
			}
			if err := r.hold(stream.Context()); err != nil {
				return err
			}
			wire, encoding := req.size, ""
			if w, ok := stream.Context().Value(wireKey{}).(*wireInfo); ok && w.size > 0 {
				wire, encoding = w.size, w.encoding
			}
			r.recordSize(GRPC, req.size, wire, encoding)
			return stream.SendMsg(&colmetricpb.ExportMetricsServiceResponse{})
		}))
}
