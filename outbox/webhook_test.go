package outbox_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A refusing webhook's answer is in its error (and so in last_error):
// bounded, on one line, valid UTF-8, without the webhook's password.
func TestWebhookErrorCarriesBody(t *testing.T) {
	t.Parallel()
	var body string
	var status int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://", "http://hook:s3cretpw@", 1)
	pub := outbox.HTTPPublisher{URL: url}
	publish := func(s int, b string) error {
		status, body = s, b
		return pub.Publish(context.Background(), outbox.Message{ID: 1, Topic: "t", Payload: []byte("x")})
	}
	t.Run("400 with a reason", func(t *testing.T) {
		err := publish(400, "poison rejected\n")
		if !outbox.IsPermanent(err) || !strings.HasSuffix(err.Error(), `400 Bad Request: "poison rejected"`) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("503 is retried and says why", func(t *testing.T) {
		err := publish(503, "maintenance until 10:00")
		if outbox.IsPermanent(err) || !strings.Contains(err.Error(), `"maintenance until 10:00"`) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("empty body", func(t *testing.T) {
		if err := publish(404, ""); !strings.HasSuffix(err.Error(), "404 Not Found") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("secrets, bytes that are not UTF-8, a long body", func(t *testing.T) {
		err := publish(400, "bad auth hook:s3cretpw via "+url+"\x00\xff\xfe"+strings.Repeat("é", 2000))
		msg := err.Error()
		if strings.Contains(msg, "s3cretpw") || !utf8.ValidString(msg) || len(msg) > 700 || !strings.Contains(msg, "…") || strings.ContainsRune(msg, 0) {
			t.Fatalf("got %d bytes: %q", len(msg), msg)
		}
	})
}

// The reason reaches the dead letter.
func TestDeadLetterKeepsWebhookReason(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "poison rejected", http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close) // the families run after this function returns
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		r, err := outbox.NewRelay(env.DB, outbox.HTTPPublisher{URL: srv.URL}, outbox.RelayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := r.Once(ctx)
		if err != nil || n != 1 {
			t.Fatal(n, err)
		}
		dead, err := ob.Dead(ctx, 10)
		if err != nil || len(dead) != 1 || !strings.Contains(dead[0].LastError, `400 Bad Request: "poison rejected"`) {
			t.Fatalf("dead letters %+v %v", dead, errors.Join(err))
		}
	})
}
