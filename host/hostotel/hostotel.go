package hostotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kiln-dev/kiln/host"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/kiln-dev/kiln/host"

// Attribute keys of the spans.
const (
	AttrBackend    = attribute.Key("kiln.backend")        // "vulkan:0"
	AttrDevice     = attribute.Key("kiln.device")         // the adapter's name
	AttrProgram    = attribute.Key("kiln.program")        // the program's name
	AttrCache      = attribute.Key("kiln.cache")          // "hit", "miss", "off"
	AttrCommands   = attribute.Key("kiln.commands")       // a submit's commands
	AttrPluginTime = attribute.Key("kiln.plugin_time_ns") // what the plugin measured
	AttrDeviceTime = attribute.Key("kiln.device_time_ns") // what the device measured
)

// Hook is a host.Hook that records a span per operation.
type Hook struct {
	tracer trace.Tracer
}

var _ host.Hook = (*Hook)(nil)

// New returns a Hook whose spans go to tp; nil takes the global
// TracerProvider (otel.GetTracerProvider) once, now.
func New(tp trace.TracerProvider) *Hook {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Hook{tracer: tp.Tracer(ScopeName)}
}

// Observe implements host.Hook: a span "kiln.dispatch", "kiln.submit" or
// "kiln.compile" from op.Start to op.Start+op.Took.
func (h *Hook) Observe(ctx context.Context, op host.Operation) {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, AttrBackend.String(op.Backend))
	if op.Device != "" {
		attrs = append(attrs, AttrDevice.String(op.Device))
	}
	if op.Program != "" {
		attrs = append(attrs, AttrProgram.String(op.Program))
	}
	if op.Cache != "" {
		attrs = append(attrs, AttrCache.String(op.Cache))
	}
	if op.Kind == host.OpSubmit {
		attrs = append(attrs, AttrCommands.Int(op.Commands))
	}
	if op.PluginTime > 0 {
		attrs = append(attrs, AttrPluginTime.Int64(op.PluginTime.Nanoseconds()))
	}
	if op.DeviceTime > 0 {
		attrs = append(attrs, AttrDeviceTime.Int64(op.DeviceTime.Nanoseconds()))
	}
	_, span := h.tracer.Start(ctx, "kiln."+op.Kind, trace.WithTimestamp(op.Start), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if op.Err != nil {
		span.RecordError(op.Err)
		span.SetStatus(codes.Error, op.Err.Error())
	}
	span.End(trace.WithTimestamp(op.Start.Add(op.Took)))
}
