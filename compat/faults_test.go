package compat_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/internal/localdb"
)

// The fenced writer of TestPreviousReleaseFencedWritersUnderFaults, run
// as a process of its own (this test binary, COMPAT_ROLE=writer): it
// takes the lease with the previous release's Acquire (retrying while
// another holds it), prints HELD <token>, renews it every TTL/4, and
// writes rows fenced with its token (Fence, 20 ms of work, INSERT,
// COMMIT) until a fence or a renewal is refused. COMPAT_UNFENCED=1 skips
// the Fence: the broken writer the test must catch.
func TestMain(m *testing.M) {
	if os.Getenv("COMPAT_ROLE") == "writer" {
		writer()
		return
	}
	os.Exit(m.Run())
}

const (
	faultLease = "compat-fault"
	faultTTL   = 2 * time.Second
)

func writer() {
	ctx := context.Background()
	db, err := sqlcoord.Open(ctx, os.Getenv("COMPAT_DSN"))
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	c := coord.New(db)
	owner := "writer-" + strconv.Itoa(os.Getpid())
	var l coord.Lease
	for {
		if l, err = c.Acquire(ctx, faultLease, owner, faultTTL); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("HELD", l.Token)
	var mu sync.Mutex
	lost := false
	go func() {
		for {
			time.Sleep(faultTTL / 4)
			if _, err := c.Renew(ctx, l); err != nil {
				mu.Lock()
				lost = true
				mu.Unlock()
				fmt.Println("LOST", err)
				return
			}
		}
	}()
	unfenced := os.Getenv("COMPAT_UNFENCED") == "1"
	for {
		mu.Lock()
		gone := lost
		mu.Unlock()
		if gone && !unfenced {
			os.Exit(0)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
		if !unfenced {
			if err := c.Fence(ctx, tx, "compat-resource", l.Token); err != nil {
				tx.Rollback()
				var stale *coord.StaleTokenError
				if errors.As(err, &stale) {
					fmt.Println("REFUSED", l.Token)
					os.Exit(0)
				}
				fmt.Println("ERROR", err)
				os.Exit(2)
			}
		}
		time.Sleep(20 * time.Millisecond) // the work the lease protects
		if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO compat_writes (token) VALUES (?)`), l.Token); err != nil {
			tx.Rollback()
			continue // the session was ended under it: the write did not happen
		}
		if err := tx.Commit(); err == nil {
			fmt.Println("WROTE", l.Token)
		}
	}
}

// writerProc is a running writer process and the lines it printed.
type writerProc struct {
	cmd   *exec.Cmd
	lines chan string
}

func startWriter(t *testing.T, dsn string, extra ...string) *writerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(append(os.Environ(), "COMPAT_ROLE=writer", "COMPAT_DSN="+dsn), extra...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &writerProc{cmd: cmd, lines: make(chan string, 4096)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case w.lines <- s.Text():
			default:
			}
		}
		close(w.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	return w
}

// await returns the token of the first line starting with prefix.
func (w *writerProc) await(t *testing.T, prefix string, limit time.Duration) int64 {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				t.Fatalf("the writer exited before %s", prefix)
			}
			if strings.HasPrefix(l, "ERROR") {
				t.Fatalf("writer: %s", l)
			}
			if f := strings.Fields(l); len(f) == 2 && f[0] == prefix {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		case <-deadline:
			t.Fatalf("no %s from the writer within %v", prefix, limit)
		}
	}
}

// TestPreviousReleaseFencedWritersUnderFaults: the previous release's
// leases and fences on the schema this checkout ships, across processes:
// a holder SIGKILLed, its successor SIGSTOPped past the TTL (in the
// middle of a fenced transaction, most likely) and resumed after a third
// took over. What the user relies on: the rows written under the lease,
// in the order they were written, never go back to an older token, and each
// takeover issues a larger token.
func TestPreviousReleaseFencedWritersUnderFaults(t *testing.T) {
	if os.Getenv("SQLCOORD_NEW_CLI") == "" {
		t.Skip("SQLCOORD_NEW_CLI is not set: run scripts/compat-test.sh")
	}
	for _, fam := range []string{"postgres", "mysql"} {
		t.Run(fam, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			srv, err := localdb.Start(ctx, fam)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			dsn := currentSchema(ctx, t, srv, "compat_faults")
			db, err := sqlcoord.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			create := `CREATE TABLE compat_writes (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL)`
			if fam == "mysql" {
				create = `CREATE TABLE compat_writes (seq BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL)`
			}
			if _, err := db.ExecContext(ctx, create); err != nil {
				t.Fatal(err)
			}
			var extra []string
			if os.Getenv("COMPAT_UNFENCED") == "1" {
				extra = append(extra, "COMPAT_UNFENCED=1")
			}

			a := startWriter(t, dsn, extra...)
			t1 := a.await(t, "HELD", 30*time.Second)
			a.await(t, "WROTE", 10*time.Second)
			a.cmd.Process.Signal(syscall.SIGKILL)

			b := startWriter(t, dsn, extra...)
			t2 := b.await(t, "HELD", faultTTL+10*time.Second)
			if t2 <= t1 {
				t.Fatalf("token after the holder was killed: %d, want > %d", t2, t1)
			}
			b.await(t, "WROTE", 10*time.Second)
			b.cmd.Process.Signal(syscall.SIGSTOP)
			c := startWriter(t, dsn, extra...)
			// with the previous release a successor waits for a holder frozen
			// inside its fenced transaction until it is resumed
			time.Sleep(faultTTL + time.Second)
			b.cmd.Process.Signal(syscall.SIGCONT)
			t3 := c.await(t, "HELD", 30*time.Second)
			if t3 <= t2 {
				t.Fatalf("token after the holder froze: %d, want > %d", t3, t2)
			}
			c.await(t, "WROTE", 30*time.Second)
			time.Sleep(time.Second) // the resumed writer's next attempts

			rows, err := db.QueryContext(ctx, `SELECT seq, token FROM compat_writes ORDER BY seq`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var last, lastSeq, n int64
			for rows.Next() {
				var seq, tok int64
				if err := rows.Scan(&seq, &tok); err != nil {
					t.Fatal(err)
				}
				n++
				if tok < last {
					t.Fatalf("write %d with token %d committed after write %d with token %d: a zombie's write got through", seq, tok, lastSeq, last)
				}
				last, lastSeq = tok, seq
			}
			t.Logf("%d fenced writes by tokens %d, %d, %d, never going back", n, t1, t2, t3)
		})
	}
}
