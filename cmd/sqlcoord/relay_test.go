package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// `sqlcoord relay --listen`: /metrics carries the Go and process
// collectors, the outbox gauges, the per-topic publish counters and the
// call histogram.
func TestRelayMetricsEndpoint(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		if err := outbox.New(env.DB).EnqueueNow(context.Background(), outbox.Msg{Topic: "orders", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "relay", "--dsn", env.DSN, "--publisher", "stdout", "--listen", "127.0.0.1:0")
		stdout, _ := cmd.StdoutPipe()
		a := startRelayCLI(t, cmd)
		published := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "topic=orders") {
					published <- sc.Text()
				}
			}
		}()
		select {
		case <-published:
		case <-time.After(20 * time.Second):
			t.Fatal("the message was not published")
		}
		// The batch commits after the publisher printed, and records its
		// metrics then: read /metrics until they are there (a loaded
		// machine can take a while).
		if buildTags != "full" { // the default build: no Prometheus, and it says how to get it
			resp, err := http.Get("http://" + a + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "-tags full") {
				t.Errorf("/metrics in the default build: %d %s", resp.StatusCode, body)
			}
			return
		}
		wants := []string{"go_goroutines", "process_cpu_seconds_total", "sqlcoord_outbox_pending 0",
			`sqlcoord_outbox_published_total{topic="orders"} 1`, `sqlcoord_call_duration_seconds_count{dialect=`, "sqlcoord_outbox_commit_to_publish_seconds_count"}
		var missing []string
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, err := http.Get("http://" + a + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			missing = missing[:0]
			for _, want := range wants {
				if !strings.Contains(string(body), want) {
					missing = append(missing, want)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, m := range missing {
			t.Errorf("/metrics lacks %q", m)
		}
		sigtermAndWait(t, cmd, 15*time.Second)
	})
}

// /healthz answers 503 while the relay's batches fail (here: a column the
// claim reads is renamed away), and ok again once one succeeds.
func TestRelayHealthzFailsWhileBatchesFail(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		cmd := exec.Command(bin, "relay", "--dsn", env.DSN, "--publisher", "stdout", "--listen", "127.0.0.1:0", "--listen-notify", "off")
		cmd.Stdout = io.Discard
		a := startRelayCLI(t, cmd)
		health := func() int {
			resp, err := http.Get("http://" + a + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		until := func(want int) {
			t.Helper()
			deadline := time.Now().Add(20 * time.Second)
			for health() != want {
				if time.Now().After(deadline) {
					t.Fatalf("/healthz never answered %d", want)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		until(http.StatusOK)
		if _, err := env.DB.ExecContext(ctx, "ALTER TABLE coord_outbox RENAME COLUMN attempts TO attempts_away"); err != nil {
			t.Fatal(err)
		}
		until(http.StatusServiceUnavailable)
		if _, err := env.DB.ExecContext(ctx, "ALTER TABLE coord_outbox RENAME COLUMN attempts_away TO attempts"); err != nil {
			t.Fatal(err)
		}
		until(http.StatusOK)
		sigtermAndWait(t, cmd, 15*time.Second)
	})
}

// startRelayCLI starts cmd (`sqlcoord relay … --listen 127.0.0.1:0`, its
// stdout already arranged) and returns the address it logs for /healthz
// and /metrics; the process is killed when the test ends.
func startRelayCLI(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "health and metrics" {
				addr <- l.Addr
			}
		}
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("no health and metrics address logged")
	}
	return ""
}
