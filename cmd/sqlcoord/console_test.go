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

	"github.com/sqlcoord/sqlcoord/internal/dbtest"
)

// `sqlcoord console` serves the console on the address it prints, on a
// loopback port chosen by the system, and stops cleanly on SIGTERM.
func TestConsoleCommand(t *testing.T) {
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
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("console did not stop on SIGTERM")
		}
	})
}
