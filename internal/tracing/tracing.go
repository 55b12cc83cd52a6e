// Package tracing is sqlcoord's per-call instrumentation: one
// OpenTelemetry span per helper call, named "sqlcoord.<what>", with the
// dialect and the outcome, and one metrics.Recorder Call with the same
// op, outcome and the duration. Each is off (nothing allocated beyond a
// type check) unless the driver was given a tracer provider
// (sqlcoord.Options.TracerProvider) or a Recorder (Options.Metrics).
package tracing

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/metrics"
)

// Traced is what a driver implements when it carries a tracer.
type Traced interface {
	Tracer() trace.Tracer
}

// Start opens a span for a helper call on driver db (any sqlcoord
// driver); the returned end records the outcome of err and ends it. When
// the driver has no tracer, ctx is returned as is and end does nothing.
func Start(ctx context.Context, db any, name string, d *dialects.Dialect, attrs ...attribute.KeyValue) (context.Context, func(err error)) {
	return StartLinked(ctx, db, name, d, trace.SpanContext{}, attrs...)
}

// StartLinked is Start with a link to another span (when valid).
func StartLinked(ctx context.Context, db any, name string, d *dialects.Dialect, link trace.SpanContext, attrs ...attribute.KeyValue) (context.Context, func(err error)) {
	var tr trace.Tracer
	if t, ok := db.(Traced); ok {
		tr = t.Tracer()
	}
	rec := metrics.Of(db)
	_, unmeasured := rec.(metrics.Nop)
	if unmeasured && tr == nil {
		return ctx, func(error) {}
	}
	dialect := ""
	if d != nil {
		dialect = d.Name()
	}
	start := time.Now()
	var span trace.Span
	if tr != nil {
		if d != nil {
			attrs = append(attrs, attribute.String("db.system", d.Family()), attribute.String("sqlcoord.dialect", d.Name()))
		}
		opts := []trace.SpanStartOption{trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal)}
		if link.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: link}))
		}
		ctx, span = tr.Start(ctx, "sqlcoord."+name, opts...)
	}
	return ctx, func(err error) {
		outcome := Outcome(err)
		rec.Call(name, dialect, outcome, time.Since(start))
		if span == nil {
			return
		}
		span.SetAttributes(attribute.String("sqlcoord.outcome", outcome))
		if outcome == "error" {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// On reports whether the driver db has tracing on.
func On(db any) bool {
	t, ok := db.(Traced)
	return ok && t.Tracer() != nil
}

// Outcome names err for the span attribute and metrics labels: a small,
// bounded set.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, dialects.ErrLocked):
		return "locked"
	case errors.Is(err, dialects.ErrLockTimeout):
		return "timeout"
	case errors.Is(err, dialects.ErrDeadlock), errors.Is(err, dialects.ErrSerialization):
		return "conflict"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	var o interface{ Outcome() string }
	if errors.As(err, &o) {
		return o.Outcome()
	}
	return "error"
}
