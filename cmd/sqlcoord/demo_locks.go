package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
)

func init() {
	register(scenario{name: "locks", title: "row locks, kill -9 of a holder, fencing tokens", run: demoLocks})
}

// newHoldLockCmd is the helper process of the kill -9 demonstration: it
// locks a name, prints LOCKED and waits to be killed.
func newHoldLockCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use: "__hold-lock", Hidden: true, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := openDB(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			tx, err := db.BeginTx(cmd.Context(), nil)
			if err != nil {
				return err
			}
			if err := coord.New(db).TryLock(cmd.Context(), tx, name); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "LOCKED")
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "lock name")
	return cmd
}

func demoLocks(ctx context.Context, e *demoEnv) error {
	c := coord.New(e.DB)
	db := e.DB

	e.printf("1. NOWAIT: transaction A holds lock \"report\"; B tries without waiting\n")
	a, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer a.Rollback()
	if err := c.TryLock(ctx, a, "report"); err != nil {
		return err
	}
	b, _ := db.BeginTx(ctx, nil)
	start := time.Now()
	err = c.TryLock(ctx, b, "report")
	b.Rollback()
	e.printf("   B: %v after %v  (errors.Is ErrLocked: %v)\n", shortErr(err), time.Since(start).Round(time.Microsecond), errors.Is(err, sqlcoord.ErrLocked))

	wait := time.Second
	e.printf("2. bounded wait: B waits at most %v\n", wait)
	b, _ = db.BeginTx(ctx, nil)
	start = time.Now()
	err = c.Lock(ctx, b, "report", wait)
	b.Rollback()
	e.printf("   B: %v after %v\n", shortErr(err), time.Since(start).Round(time.Millisecond))
	a.Rollback()

	e.printf("3. kill -9: a separate process holds lock \"nightly\"; B waits up to 30s; the holder is killed\n")
	if e.Self == "" {
		return errors.New("cannot find this executable to start a helper process")
	}
	hold := demoChild(ctx, e.Self, core.ConnString(db), "__hold-lock", "--name", "nightly")
	out, _ := hold.StdoutPipe()
	hold.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := hold.Start(); err != nil {
		return err
	}
	defer hold.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "LOCKED" {
		return fmt.Errorf("helper said %q", line)
	}
	b, _ = db.BeginTx(ctx, nil)
	defer b.Rollback()
	got := make(chan error, 1)
	waitStart := time.Now()
	go func() { got <- c.Lock(ctx, b, "nightly", 30*time.Second) }()
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	hold.Process.Signal(syscall.SIGKILL)
	hold.Wait()
	if err := <-got; err != nil {
		return err
	}
	e.printf("   holder pid %d killed with SIGKILL; B got the lock %v after the kill (waited %v in all)\n",
		hold.Process.Pid, time.Since(killed).Round(time.Millisecond), time.Since(waitStart).Round(time.Millisecond))
	e.printf("   (a frozen holder keeps it until the server ends its idle session: see Client.SetIdleTimeout)\n")
	b.Rollback()

	e.printf("4. fencing: A holds token 7, pauses past its lease; B takes token 8 and writes; A's late write\n")
	db.ExecContext(ctx, `DROP TABLE IF EXISTS demo_files`)
	if _, err := db.ExecContext(ctx, `CREATE TABLE demo_files (name VARCHAR(50) PRIMARY KEY, body VARCHAR(50) NOT NULL, fence BIGINT NOT NULL DEFAULT 0)`); err != nil {
		return err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE demo_files`)
	if _, err := db.ExecContext(ctx, `INSERT INTO demo_files (name, body) VALUES ('report', 'initial')`); err != nil {
		return err
	}
	lease := fmt.Sprintf("demo-report-%d", time.Now().UnixNano())
	for i := 0; i < 6; i++ { // so that A's token is 7, as in the article
		l, err := c.Acquire(ctx, lease, "", time.Minute)
		if err != nil {
			return err
		}
		c.Release(ctx, l)
	}
	la, err := c.Acquire(ctx, lease, "A", 300*time.Millisecond)
	if err != nil {
		return err
	}
	e.printf("   A acquired token %d (TTL 300ms) and pauses 500ms (a GC pause)\n", la.Token)
	time.Sleep(500 * time.Millisecond)
	lb, err := c.Acquire(ctx, lease, "B", time.Minute)
	if err != nil {
		return err
	}
	write := func(tok int64, body string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := c.Update(ctx, tx, coord.FencedUpdate{Table: "demo_files", KeyColumn: "name", Key: "report",
			FenceColumn: "fence", Token: tok, Set: map[string]any{"body": body}}); err != nil {
			return err
		}
		return tx.Commit()
	}
	e.printf("   B acquired token %d; B writes: %v\n", lb.Token, okOr(write(lb.Token, "written by B")))
	err = write(la.Token, "written by A (late)")
	e.printf("   A wakes, writes with token %d: %v (ErrStaleToken: %v)\n", la.Token, shortErr(err), errors.Is(err, coord.ErrStaleToken))
	var body string
	var fence int64
	db.QueryRowContext(ctx, `SELECT body, fence FROM demo_files WHERE name = 'report'`).Scan(&body, &fence)
	e.printf("   final row: body=%q fence=%d\n", body, fence)
	return nil
}

func okOr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func shortErr(err error) string {
	if err == nil {
		return "ok"
	}
	s := err.Error()
	if i := strings.Index(s, ": ERROR"); i > 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ": Error "); i > 0 {
		s = s[:i]
	}
	return s
}
