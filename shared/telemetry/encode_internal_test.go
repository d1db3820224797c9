package telemetry

import (
	"bytes"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// emissionLike is a request shaped as the emitter's: shared attributes, int and double
// gauges, a zero value, the fleet resource with attributes of every scalar type.
func emissionLike() *colmetricpb.ExportMetricsServiceRequest {
	state := str("cluster.maintenance.state", "pending")
	id := str("cloud.resource_id", "/subscriptions/x/resourceGroups/rg/providers/p/c1")
	long := str("cloud.resource_id", string(bytes.Repeat([]byte("é"), 300)))
	one, zero := &metricpb.NumberDataPoint_AsInt{AsInt: 1}, &metricpb.NumberDataPoint_AsInt{AsInt: 0}
	gauge := func(name, unit string, pts ...*metricpb.NumberDataPoint) *metricpb.Metric {
		return &metricpb.Metric{Name: name, Description: "d " + name, Unit: unit, Data: &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: pts}}}
	}
	return &colmetricpb.ExportMetricsServiceRequest{ResourceMetrics: []*metricpb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			str("service.name", "maintsignals"),
			{Key: "b", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
			{Key: "i", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -3}}},
			{Key: "f", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}},
			{Key: "empty", Value: &commonpb.AnyValue{}},
		}},
		SchemaUrl: "https://opentelemetry.io/schemas/1.26.0",
		ScopeMetrics: []*metricpb.ScopeMetrics{{
			Scope: &commonpb.InstrumentationScope{Name: "maintsignals/functions/emitter"},
			Metrics: []*metricpb.Metric{
				gauge("cluster.maintenance.status", "1",
					&metricpb.NumberDataPoint{Attributes: []*commonpb.KeyValue{id, state}, TimeUnixNano: 1_800_000_000_000_000_005, Value: one},
					&metricpb.NumberDataPoint{Attributes: []*commonpb.KeyValue{long, state}, TimeUnixNano: 1_800_000_000_000_000_005, Value: zero}),
				gauge("cluster.maintenance.window.start_time", "s",
					&metricpb.NumberDataPoint{Attributes: []*commonpb.KeyValue{id}, TimeUnixNano: 7, StartTimeUnixNano: 3, Value: &metricpb.NumberDataPoint_AsDouble{AsDouble: 1.8e9 + 0.25}, Flags: 1}),
				gauge("empty", ""),
			},
		}},
	}}}
}

func TestMarshalRequest_TheBytesOfProtoMarshal(t *testing.T) {
	req := emissionLike()
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalRequest([]byte("prefix"), req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	// Twice the same, from the pool.
	again, _ := marshalRequest(nil, req)
	if !bytes.Equal(again, want) {
		t.Fatal("a second encoding differs")
	}
}

// A request with what the encoder does not write is left to proto.Marshal: its bytes decode
// to the same request.
func TestMarshalRequest_LeavesOtherMessagesToProtobuf(t *testing.T) {
	for name, change := range map[string]func(*colmetricpb.ExportMetricsServiceRequest){
		"a sum": func(r *colmetricpb.ExportMetricsServiceRequest) {
			r.ResourceMetrics[0].ScopeMetrics[0].Metrics[0].Data = &metricpb.Metric_Sum{Sum: &metricpb.Sum{IsMonotonic: true}}
		},
		"an exemplar": func(r *colmetricpb.ExportMetricsServiceRequest) {
			p := r.ResourceMetrics[0].ScopeMetrics[0].Metrics[0].GetGauge().DataPoints[0]
			p.Exemplars = []*metricpb.Exemplar{{TimeUnixNano: 1}}
		},
		"an array attribute": func(r *colmetricpb.ExportMetricsServiceRequest) {
			p := r.ResourceMetrics[0].ScopeMetrics[0].Metrics[0].GetGauge().DataPoints[0]
			p.Attributes = append(p.Attributes, &commonpb.KeyValue{Key: "a", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{}}}})
		},
		"scope attributes": func(r *colmetricpb.ExportMetricsServiceRequest) {
			r.ResourceMetrics[0].ScopeMetrics[0].Scope.Attributes = []*commonpb.KeyValue{str("k", "v")}
		},
	} {
		t.Run(name, func(t *testing.T) {
			req := emissionLike()
			change(req)
			b, err := marshalRequest(nil, req)
			if err != nil {
				t.Fatal(err)
			}
			var back colmetricpb.ExportMetricsServiceRequest
			if err := proto.Unmarshal(b, &back); err != nil || !proto.Equal(&back, req) {
				t.Errorf("round trip differs (%v)", err)
			}
		})
	}
}

func BenchmarkMarshalRequest(b *testing.B) {
	req := emissionLike()
	pts := req.ResourceMetrics[0].ScopeMetrics[0].Metrics[0].GetGauge()
	for len(pts.DataPoints) < 10000 {
		pts.DataPoints = append(pts.DataPoints, pts.DataPoints[0])
	}
	b.Run("by hand", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = marshalRequest(buf[:0], req)
		}
	})
	b.Run("proto.Marshal", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = proto.MarshalOptions{}.MarshalAppend(buf[:0], req)
		}
	})
}
