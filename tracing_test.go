package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if a.Key == attribute.Key(key) {
			return a.Value.String()
		}
	}
	return ""
}

// OpenTelemetry spans for every helper, with the dialect and the
// outcome, off unless a tracer provider is given; the traceparent goes from
// Enqueue through the message headers to the publisher.
func TestTracing(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.Open(t)
		ob := outbox.New(db)

		// off by default: no traceparent added
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "off", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}

		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer tp.Shutdown(ctx)
		db = env.Open(t, sqlcoord.Options{TracerProvider: tp})
		c, ob := coord.New(db), outbox.New(db)
		keys, bar := txn.NewKeys(db, txn.KeysOptions{}), txn.NewBarrier(db)

		lease, err := c.Acquire(ctx, "traced", "", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		err = txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			if err := c.TryLock(ctx, tx, "traced-lock"); err != nil {
				return err
			}
			if err := c.Fence(ctx, tx, "traced-res", lease.Token); err != nil {
				return err
			}
			if _, err := keys.Begin(ctx, tx, "s", "k1", nil); err != nil {
				return err
			}
			if err := keys.Complete(ctx, tx, "s", "k1", []byte("r")); err != nil {
				return err
			}
			if _, err := bar.CallTx(ctx, tx, "g", "b", txn.OpTry, func(context.Context, *sql.Tx) error { return nil }); err != nil {
				return err
			}
			// a lock held by another transaction: outcome "locked"
			otx, _ := env.DB.BeginTx(ctx, nil)
			defer otx.Rollback()
			coord.New(env.DB).TryLock(ctx, otx, "held")
			if err := c.TryLock(ctx, tx, "held"); !errors.Is(err, sqlcoord.ErrLocked) {
				return err
			}
			return ob.Enqueue(ctx, tx, outbox.Msg{Topic: "traced", Payload: []byte("p")})
		})
		if err != nil {
			t.Fatal(err)
		}
		var pubCtx trace.SpanContext
		var headers map[string]string
		r, _ := outbox.NewRelay(db, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
			if m.Topic == "traced" {
				pubCtx, headers = trace.SpanContextFromContext(ctx), m.Headers
			} else if _, ok := m.Headers["traceparent"]; ok {
				t.Errorf("a message enqueued with tracing off carries a traceparent")
			}
			return nil
		}), outbox.RelayOptions{Listen: outbox.ListenOff})
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}

		spans := tracetest.SpanStubs(exp.GetSpans())
		byName := map[string][]tracetest.SpanStub{}
		for _, s := range spans {
			byName[s.Name] = append(byName[s.Name], s)
		}
		for _, name := range []string{"sqlcoord.lease.acquire", "sqlcoord.txn.do", "sqlcoord.lock.try", "sqlcoord.fence",
			"sqlcoord.keys.begin", "sqlcoord.keys.complete", "sqlcoord.barrier", "sqlcoord.outbox.enqueue",
			"sqlcoord.outbox.relay.batch", "sqlcoord.outbox.publish"} {
			ss := byName[name]
			if len(ss) == 0 {
				t.Errorf("no span %s (have %d spans)", name, len(spans))
				continue
			}
			if attr(ss[0], "db.system") != env.Family {
				t.Errorf("%s: db.system %q, want %s", name, attr(ss[0], "db.system"), env.Family)
			}
		}
		outcomes := map[string]bool{}
		for _, s := range byName["sqlcoord.lock.try"] {
			outcomes[attr(s, "sqlcoord.outcome")] = true
		}
		if !outcomes["ok"] || !outcomes["locked"] {
			t.Errorf("lock.try outcomes %v, want ok and locked", outcomes)
		}
		// the helpers inside txn.Do are its children
		do := byName["sqlcoord.txn.do"][0]
		if fence := byName["sqlcoord.fence"][0]; fence.Parent.SpanID() != do.SpanContext.SpanID() {
			t.Errorf("fence span is not a child of txn.do")
		}
		// traceparent: Enqueue's trace continues in the publisher
		enq := byName["sqlcoord.outbox.enqueue"][0]
		if headers["traceparent"] == "" {
			t.Fatalf("message headers without traceparent: %v", headers)
		}
		if pubCtx.TraceID() != enq.SpanContext.TraceID() {
			t.Errorf("publisher's trace %s, want the enqueue's %s", pubCtx.TraceID(), enq.SpanContext.TraceID())
		}
		for _, pub := range byName["sqlcoord.outbox.publish"] {
			if attr(pub, "messaging.destination.name") != "traced" {
				continue
			}
			if pub.SpanContext.TraceID() != enq.SpanContext.TraceID() || len(pub.Links) != 1 {
				t.Errorf("publish span: trace %s (want %s), %d links (want the batch)", pub.SpanContext.TraceID(), enq.SpanContext.TraceID(), len(pub.Links))
			}
		}
	})
}

// Renewals of a kept-alive lease are children of one keep-alive span,
// not one-span traces of their own.
func TestTracingKeepAliveRenewals(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer tp.Shutdown(ctx)
		db := env.Open(t, sqlcoord.Options{TracerProvider: tp})
		c := coord.New(db)
		// A TTL far above the interval, and the renewals counted rather
		// than slept for: a loaded machine (the suite under -race on 2
		// cores) once traced a single renewal in a fixed 400 ms.
		l, err := c.Acquire(ctx, "kept", "", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{Interval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for wait := time.Now().Add(15 * time.Second); time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
			n := 0
			for _, s := range tracetest.SpanStubs(exp.GetSpans()) {
				if s.Name == "sqlcoord.lease.renew" {
					n++
				}
			}
			if n >= 3 {
				break
			}
		}
		k.Stop()
		<-k.Context().Done()
		var keep tracetest.SpanStub
		deadline := time.Now().Add(5 * time.Second)
		for keep.Name == "" && time.Now().Before(deadline) {
			for _, s := range tracetest.SpanStubs(exp.GetSpans()) {
				if s.Name == "sqlcoord.lease.keepalive" {
					keep = s
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		if keep.Name == "" {
			t.Fatal("no keep-alive span")
		}
		renewals := 0
		for _, s := range tracetest.SpanStubs(exp.GetSpans()) {
			if s.Name != "sqlcoord.lease.renew" {
				continue
			}
			renewals++
			if s.Parent.SpanID() != keep.SpanContext.SpanID() {
				t.Errorf("a renewal's parent is %v, want the keep-alive span", s.Parent.SpanID())
			}
		}
		if renewals < 3 {
			t.Errorf("%d renewals traced, want several", renewals)
		}
	})
}
