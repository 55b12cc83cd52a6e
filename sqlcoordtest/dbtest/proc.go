package dbtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
)

// HelperEnv names the helper a re-executed test binary should run.
const HelperEnv = "SQLCOORD_HELPER"

// Helper returns the helper name when this process is a helper process
// (started by Spawn), or "". Call it first in TestMain.
func Helper() string { return os.Getenv(HelperEnv) }

// Proc is a helper OS process: the test binary itself, re-run with
// SQLCOORD_HELPER=name so that TestMain dispatches to the helper instead of
// the tests. Its stdout lines are delivered on Lines.
type Proc struct {
	Cmd   *exec.Cmd
	Lines chan string
	done  chan struct{}
}

// Spawn starts a helper process with extra environment variables
// ("KEY=value"). It is killed (SIGKILL) at the end of the test.
func Spawn(t testing.TB, name string, env ...string) *Proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), HelperEnv+"="+name), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, Lines: make(chan string, 1024), done: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.Lines <- sc.Text()
		}
		close(p.Lines)
	}()
	// Wait closes the pipe once the process has exited: only after every
	// line was read (it dropped the last lines still in the pipe, seen as
	// a batch of ids missing when the lines were long).
	go func() { <-read; cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Signal(syscall.SIGCONT)
		p.Kill()
	})
	return p
}

// WaitLine returns the first line starting with prefix, failing the test
// after timeout or when the process exits first.
func (p *Proc) WaitLine(t testing.TB, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.Lines:
			if !ok {
				t.Fatalf("helper exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("helper did not print %q within %v", prefix, timeout)
		}
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	if p.Cmd.Process != nil {
		p.Cmd.Process.Signal(sig)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	go func() { // lines nobody reads any more must not keep the reader from EOF
		for range p.Lines {
		}
	}()
	<-p.done
}

// Wait waits for the process to exit on its own.
func (p *Proc) Wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// ExitCode is the process's exit code after it ended.
func (p *Proc) ExitCode() int { return p.Cmd.ProcessState.ExitCode() }

// HelperFunc is the body of a helper process: ctx ends on SIGTERM, db is
// the database named by the DSN environment variable.
type HelperFunc func(ctx context.Context, db *sqlcoord.DB) error

// MainWithHelpers is Main for packages whose tests Spawn helper processes:
// in a helper process it runs helpers[name] and exits (0 on success, 1 on
// error, 2 for an unknown helper, 3 when the database cannot be opened).
func MainWithHelpers(m *testing.M, helpers map[string]HelperFunc) {
	if name := Helper(); name != "" {
		os.Exit(runHelperProcess(name, helpers))
	}
	Main(m)
}

func runHelperProcess(name string, helpers map[string]HelperFunc) int {
	fn, ok := helpers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "helper: unknown helper %q\n", name)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db, err := HelperDB(ctx, 32)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer db.Close()
	if err := fn(ctx, db); err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", name, err)
		return 1
	}
	return 0
}
