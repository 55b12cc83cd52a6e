package main

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// `sqlcoord console` serves the console on the address it prints, on a
// loopback port chosen by the system, and stops cleanly on SIGTERM.
func TestConsoleCommand(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		cmd := exec.Command(bin, "console", "--dsn", env.DSN, "--listen", "127.0.0.1:0")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "console on http://127.0.0.1:") {
			t.Fatalf("first line %q: %v", line, err)
		}
		u := strings.Fields(line)[2]
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Overview") {
			t.Fatalf("GET %s: %d\n%.500s", u, resp.StatusCode, body)
		}
		sigtermAndWait(t, cmd, 10*time.Second)
	})
}

// sigtermAndWait sends SIGTERM and wants a clean exit (status 0) in time.
func sigtermAndWait(t *testing.T, cmd *exec.Cmd, within time.Duration) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: exit after SIGTERM: %v", cmd.Args[1], err)
		}
	case <-time.After(within):
		t.Fatalf("%s did not stop on SIGTERM within %v", cmd.Args[1], within)
	}
}
