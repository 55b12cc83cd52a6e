package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// `sqlcoord relay --mode stream|auto|poll`: on PostgreSQL (wal_level
// logical here) stream and auto stream; on MariaDB stream is refused as a
// usage error and auto polls, saying why. Either way the message arrives.
func TestRelayModes(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		for _, mode := range []string{"stream", "auto", "poll"} {
			t.Run(mode, func(t *testing.T) {
				if mode == "stream" && env.Family == "mysql" {
					code, out := exitOf(t, bin, nil, "relay", "--dsn", env.DSN, "--mode", "stream")
					if code != 2 || !strings.Contains(out, "streaming unsupported") {
						t.Fatalf("exit %d, want 2 and why: %s", code, out)
					}
					return
				}
				payload := `{"mode":"` + mode + `"}`
				if err := outbox.New(env.DB).EnqueueNow(context.Background(), outbox.Msg{Topic: "orders", Payload: []byte(payload)}); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(bin, "relay", "--dsn", env.DSN, "--mode", mode, "--group", "cli_"+mode)
				stdout, _ := cmd.StdoutPipe()
				var stderr dbtest.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill() })
				published := make(chan struct{})
				go func() {
					sc := bufio.NewScanner(stdout)
					for sc.Scan() {
						if strings.Contains(sc.Text(), payload) {
							close(published)
							return
						}
					}
				}()
				select {
				case <-published:
				case <-time.After(30 * time.Second):
					t.Fatalf("the message was not published; stderr: %s", stderr.String())
				}
				sigtermAndWait(t, cmd, 15*time.Second)
				want := map[string]string{"postgres/stream": "stream", "postgres/auto": "stream", "postgres/poll": "poll", "mysql/auto": "poll", "mysql/poll": "poll"}[env.Family+"/"+mode]
				ran := ""
				for _, line := range strings.Split(stderr.String(), "\n") {
					var l struct{ Msg, Mode, Reason string }
					if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "relay running" {
						ran = l.Mode
					}
				}
				if ran != want {
					t.Fatalf("ran in mode %q, want %q; stderr: %s", ran, want, stderr.String())
				}
				if env.Family == "mysql" && mode == "auto" && !strings.Contains(stderr.String(), "relay mode auto: polling") {
					t.Fatalf("auto fell back without saying why: %s", stderr.String())
				}
			})
		}
		t.Run("doctor shows the slots", func(t *testing.T) {
			if env.Family != "postgres" {
				t.Skip("slots are PostgreSQL's")
			}
			out, _ := runCLI(t, "doctor", "--dsn", env.DSN, "--json")
			var rep struct {
				Slots      []outbox.Slot
				Guarantees []struct{ Name, Status string }
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			names := ""
			for _, s := range rep.Slots {
				names += s.Name + " "
			}
			if !strings.Contains(names, "sqlcoord_cli_stream_") || !strings.Contains(names, "sqlcoord_cli_auto_") {
				t.Fatalf("slots %q: want the stream and auto groups'", names)
			}
			ok := false
			for _, g := range rep.Guarantees {
				ok = ok || (g.Name == "slots" && g.Status == "holds")
			}
			if !ok {
				t.Fatalf("no holding slots guarantee: %s", out)
			}
			// the retired groups' slots can be dropped
			for _, g := range []string{"cli_stream", "cli_auto"} {
				if out, err := runCLI(t, "relay", "drop-slot", "--dsn", env.DSN, "--group", g); err != nil {
					t.Fatalf("drop-slot %s: %v: %s", g, err, out)
				}
			}
			if s, _ := outbox.Slots(context.Background(), env.DB); len(s) != 0 {
				t.Fatalf("slots left: %v", s)
			}
		})
		t.Run("bad mode", func(t *testing.T) {
			if code, out := exitOf(t, bin, nil, "relay", "--dsn", env.DSN, "--mode", "wal"); code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, out)
			}
		})
	})
}
