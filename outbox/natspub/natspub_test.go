package natspub_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/natspub"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// startNATS runs a real NATS server with JetStream in this process.
func startNATS(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return s.ClientURL(), js
}

func TestNATSPublisherDedup(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		url, js := startNATS(t)
		pub, closeFn, err := natspub.New(url)
		if err != nil {
			t.Fatal(err)
		}
		defer closeFn()
		// a relay that crashed after publishing republishes: the stream's
		// duplicate window drops the copy because the message id is the outbox id
		m := outbox.Message{ID: 1_000_000, Topic: "orders.created", Payload: []byte("x")}
		for i := 0; i < 3; i++ {
			if err := pub.Publish(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		ob := outbox.New(env.DB)
		for i := 0; i < 50; i++ {
			ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders.created", Key: "k" + strconv.Itoa(i%3), Payload: []byte(strconv.Itoa(i))})
		}
		r, _ := outbox.NewRelay(env.DB, pub, outbox.RelayOptions{BatchSize: 20})
		for i := 0; i < 5; i++ {
			if _, err := r.Once(ctx); err != nil {
				t.Fatal(err)
			}
		}
		info, err := js.Stream(ctx, "ORDERS")
		if err != nil {
			t.Fatal(err)
		}
		st, _ := info.Info(ctx)
		// 1 from the three manual publishes + 50 from the relay
		if st.State.Msgs != 51 {
			t.Fatalf("stream holds %d messages, want 51", st.State.Msgs)
		}
		// unknown subject: a clear error, retried (not dead) by the relay
		if err := pub.Publish(ctx, outbox.Message{ID: 1, Topic: "nowhere"}); err == nil {
			t.Fatal("publish to a subject without a stream succeeded")
		}
	})
}
