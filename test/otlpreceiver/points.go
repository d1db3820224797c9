package otlpreceiver

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
)

// Point types.
const (
	Gauge     = "gauge"
	Sum       = "sum"
	Histogram = "histogram"
	Other     = "other"
)

// Point is one data point, flattened with its metric, scope and resource.
type Point struct {
	Resource map[string]string
	Scope    string
	Metric   string
	Unit     string
	Type     string
	// Monotonic is set for monotonic sums (counters).
	Monotonic bool
	Attrs     map[string]string
	Time      time.Time
	// Value of a gauge or sum point (integers converted).
	Value float64
	// Count and Sum of a histogram point.
	Count uint64
	Sum   float64
}

// String is a compact form for test failure messages.
func (p Point) String() string {
	keys := make([]string, 0, len(p.Attrs))
	for k := range p.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(p.Metric)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", k, p.Attrs[k])
	}
	b.WriteByte('}')
	if p.Type == Histogram {
		fmt.Fprintf(&b, " count=%d sum=%g", p.Count, p.Sum)
	} else {
		fmt.Fprintf(&b, " %g", p.Value)
	}
	return b.String()
}

// Points flattens the data points of the request (none if the receiver keeps no payloads).
func (e Export) Points() []Point { return RequestPoints(e.Request) }

// Find returns the points of the request named metric whose attributes include attrs.
func (e Export) Find(metric string, attrs map[string]string) []Point {
	return Find(e.Points(), metric, attrs)
}

// Has reports whether the request carries metric.
func (e Export) Has(metric string) bool {
	if e.Request == nil {
		return false
	}
	for _, rm := range e.Request.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if m.GetName() == metric {
					return true
				}
			}
		}
	}
	return false
}

// Points flattens every request received so far.
func (r *Receiver) Points() []Point {
	var out []Point
	for _, e := range r.Exports() {
		out = append(out, e.Points()...)
	}
	return out
}

// Find returns the points named metric whose attributes include every key and value of attrs
// (nil attrs matches any).
func Find(points []Point, metric string, attrs map[string]string) []Point {
	var out []Point
	for _, p := range points {
		if p.Metric == metric && hasAttrs(p.Attrs, attrs) {
			out = append(out, p)
		}
	}
	return out
}

func hasAttrs(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// RequestPoints flattens the data points of an export request.
func RequestPoints(req *colmetricpb.ExportMetricsServiceRequest) []Point {
	var out []Point
	for _, rm := range req.GetResourceMetrics() {
		res := attrMap(rm.GetResource().GetAttributes())
		for _, sm := range rm.GetScopeMetrics() {
			scope := sm.GetScope().GetName()
			for _, m := range sm.GetMetrics() {
				base := Point{Resource: res, Scope: scope, Metric: m.GetName(), Unit: m.GetUnit()}
				out = appendMetric(out, base, m)
			}
		}
	}
	return out
}

func appendMetric(out []Point, base Point, m *metricpb.Metric) []Point {
	number := func(typ string, dps []*metricpb.NumberDataPoint) {
		for _, dp := range dps {
			p := base
			p.Type = typ
			p.Attrs = attrMap(dp.GetAttributes())
			p.Time = unixNano(dp.GetTimeUnixNano())
			switch v := dp.GetValue().(type) {
			case *metricpb.NumberDataPoint_AsInt:
				p.Value = float64(v.AsInt)
			case *metricpb.NumberDataPoint_AsDouble:
				p.Value = v.AsDouble
			}
			out = append(out, p)
		}
	}
	switch d := m.GetData().(type) {
	case *metricpb.Metric_Gauge:
		number(Gauge, d.Gauge.GetDataPoints())
	case *metricpb.Metric_Sum:
		base.Monotonic = d.Sum.GetIsMonotonic()
		number(Sum, d.Sum.GetDataPoints())
	case *metricpb.Metric_Histogram:
		for _, dp := range d.Histogram.GetDataPoints() {
			p := base
			p.Type = Histogram
			p.Attrs = attrMap(dp.GetAttributes())
			p.Time = unixNano(dp.GetTimeUnixNano())
			p.Count, p.Sum = dp.GetCount(), dp.GetSum()
			out = append(out, p)
		}
	default:
		p := base
		p.Type = Other
		out = append(out, p)
	}
	return out
}

func countPoints(req *colmetricpb.ExportMetricsServiceRequest) int {
	n := 0
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				switch d := m.GetData().(type) {
				case *metricpb.Metric_Gauge:
					n += len(d.Gauge.GetDataPoints())
				case *metricpb.Metric_Sum:
					n += len(d.Sum.GetDataPoints())
				case *metricpb.Metric_Histogram:
					n += len(d.Histogram.GetDataPoints())
				case *metricpb.Metric_ExponentialHistogram:
					n += len(d.ExponentialHistogram.GetDataPoints())
				case *metricpb.Metric_Summary:
					n += len(d.Summary.GetDataPoints())
				}
			}
		}
	}
	return n
}

func unixNano(ns uint64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns))
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = anyString(kv.GetValue())
	}
	return m
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	default:
		return v.String()
	}
}
