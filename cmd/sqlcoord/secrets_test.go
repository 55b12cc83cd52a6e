package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

const sentinel = "S3ntinel-Pw_x9"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// buildCLI builds the real binary once per test process, with the build
// tags of the test (full or not: what --publisher and /metrics offer).
func buildCLI(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := osMkdirTemp()
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "sqlcoord")
		if out, err := exec.Command("go", "build", "-tags", buildTags, "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = err
			binPath = string(out)
		}
	})
	if binErr != nil {
		t.Fatalf("build: %v\n%s", binErr, binPath)
	}
	return binPath
}

func noSecret(t *testing.T, where, s string) {
	t.Helper()
	if strings.Contains(s, sentinel) {
		t.Errorf("%s contains the password:\n%s", where, s)
	}
}

// The password of the DSN and of a webhook URL appears in no
// output channel: stdout and stderr of every command, the relay's JSON log,
// coord_outbox.last_error, `outbox dead`, and /healthz with the database
// down (which returns a status only).
func TestCLINeverShowsPasswords(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildCLI(t)
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		run := func(args ...string) string {
			out, _ := exec.Command(bin, args...).CombinedOutput()
			noSecret(t, strings.Join(args[:2], " "), string(out))
			return string(out)
		}
		// a webhook that checks it got the credentials, then refuses the
		// message for good (400) so it is dead-lettered with an error
		var gotAuth sync.Map
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); ok {
				gotAuth.Store(u+":"+p, true)
			}
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusBadRequest)
		}))
		defer hook.Close()
		hookURL := strings.Replace(hook.URL, "http://", "http://hookuser:"+sentinel+"@", 1) + "/hook?token=" + sentinel

		for form, dsn := range env.PasswordDSNs(t, sentinel) {
			t.Run(form, func(t *testing.T) {
				run("migrate", "up", "--dsn", dsn)
				run("migrate", "status", "--dsn", dsn)
				run("migrate", "version", "--dsn", dsn)
				run("outbox", "stats", "--dsn", dsn)
				run("outbox", "dead", "--dsn", dsn)
				run("outbox", "requeue", "all", "--dsn", dsn)
				// the same commands against a server that is not there
				bad := strings.Replace(dsn, itoa(env.Server.Port), itoa(closedPortCLI(t)), 1)
				if out := run("outbox", "stats", "--dsn", bad); !strings.Contains(out, "cannot connect") {
					t.Errorf("unreachable: %s", out)
				}
				run("migrate", "status", "--dsn", bad)
			})
		}
		// a relay, through a proxy we can cut, posting to the webhook
		// a DSN form with host:port in it, so that it can be pointed at the
		// proxy (the libpq key=value form has host= and port= apart)
		hostPort := env.Server.Host + ":" + itoa(env.Server.Port)
		var one string
		for _, d := range env.PasswordDSNs(t, sentinel) {
			if strings.Contains(d, hostPort) {
				one = d
				break
			}
		}
		proxy := dbtest.ProxyFor(t, env)
		viaDSN := strings.Replace(one, hostPort, proxy.Addr, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := outbox.New(env.DB).EnqueueNow(ctx, outbox.Msg{Topic: "orders", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		relay := exec.CommandContext(ctx, bin, "relay", "--dsn", viaDSN, "--publisher", hookURL, "--listen", ":0", "--max-attempts", "1")
		var logBuf bytes.Buffer
		stderr, _ := relay.StderrPipe()
		if err := relay.Start(); err != nil {
			t.Fatal(err)
		}
		addr := make(chan string, 1)
		var logMu sync.Mutex
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				logMu.Lock()
				logBuf.WriteString(sc.Text() + "\n")
				logMu.Unlock()
				var rec map[string]any
				if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "health and metrics" {
					addr <- rec["addr"].(string)
				}
			}
		}()
		var healthAddr string
		select {
		case healthAddr = <-addr:
		case <-ctx.Done():
			t.Fatal("relay never logged its address")
		}
		if !strings.HasPrefix(healthAddr, "127.0.0.1:") {
			t.Errorf("--listen :0 bound %s; want loopback", healthAddr)
		}
		deadline := time.Now().Add(15 * time.Second)
		for dbtest.Count(t, env.DB, `SELECT count(*) FROM coord_outbox WHERE state = 'dead'`) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("message never dead-lettered")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, ok := gotAuth.Load("hookuser:" + sentinel); !ok {
			t.Error("the webhook never received the URL's credentials")
		}
		var lastErr string
		if err := env.DB.QueryRowContext(ctx, `SELECT last_error FROM coord_outbox WHERE state = 'dead'`).Scan(&lastErr); err != nil {
			t.Fatal(err)
		}
		noSecret(t, "coord_outbox.last_error", lastErr)
		if !strings.Contains(lastErr, "400") {
			t.Errorf("last_error %q does not say what failed", lastErr)
		}
		run("outbox", "dead", "--dsn", one)
		// database down: /healthz says so, and nothing else
		proxy.SetDown(true)
		resp, err := http.Get("http://" + healthAddr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("/healthz with the database down: %d %s", resp.StatusCode, body)
		}
		noSecret(t, "/healthz", string(body))
		for _, leak := range []string{env.Name, "user", proxy.Addr, "postgres", "u_"} {
			if strings.Contains(string(body), leak) {
				t.Errorf("/healthz body %q reveals %q", body, leak)
			}
		}
		cancel()
		relay.Wait()
		logMu.Lock()
		noSecret(t, "relay log", logBuf.String())
		logMu.Unlock()
	}, dbtest.NoMigrate())
}

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "sqlcoord-cli-") }

func itoa(n int) string { return strconv.Itoa(n) }

func closedPortCLI(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// hostileDSNs are DSNs whose password (pw) a careless redaction shows:
// misspelled keys, characters a URL must escape left unescaped, quoting,
// spacing, several hosts, parameters that do not parse, secrets in query
// parameters — PostgreSQL and MySQL forms, all pointing at a closed port
// (a connection error is where a DSN is most often printed).
func hostileDSNs(pw string, port int) []string {
	a := "127.0.0.1:" + strconv.Itoa(port)
	return []string{
		"postgres://app:" + pw + "@" + a + "/x?sslmode=disable",
		"postgres://app:p@ss#" + pw + "@" + a + "/x",
		"postgres://app:" + pw + "#frag@" + a + "/x",
		"postgres://app:a/b" + pw + "@" + a + "/x",
		"postgres://app:" + pw + "?x@" + a + "/x",
		"postgresql://app@" + a + "/x?password=" + pw,
		"postgres://app@" + a + "/x?pasword=" + pw,
		"postgres://app@" + a + "/x?passwd=" + pw + "&sslmode=disable",
		"postgres://app@" + a + "/x?sslpassword=" + pw,
		"postgres://app:%40" + pw + "@" + a + "/x",
		"postgres://app:" + pw + "@" + a + ",127.0.0.2:" + strconv.Itoa(port) + "/x",
		"postgres://app:" + pw + "@" + a + "/x?sslmode=disabel",
		"postgres://app:" + pw + "@" + a + "/x?connect_timeout=abc",
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app password=" + pw + " dbname=x",
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app pasword=" + pw + " dbname=x",
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app passwd=" + pw + " dbname=x",
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app pwd=" + pw + " dbname=x",
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app passwrd=" + pw + " dbname=x",
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app password='" + pw + " with spaces' dbname=x",
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app password = " + pw + " dbname=x",
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app sslmode=disabel password=" + pw,
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app connect_timeout=abc password=" + pw,
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app secret=" + pw,
		"app:" + pw + "@tcp(" + a + ")/x?parseTime=true",
		"app:p@ss" + pw + "@tcp(" + a + ")/x",
		"app:" + pw + "@tcp(" + a + ")/x?timeout=abc",
		"mysql://app:" + pw + "@tcp(" + a + ")/x",
		"mysql://app:" + pw + "@" + a + "/x",
		"mysql://app:p#" + pw + "@" + a + "/x",
		"mariadb://app:" + pw + "@" + a + "/x?tls=skip-verify",
		"mysql://app@" + a + "/x?password=" + pw,
		"oracle://app:" + pw + "@" + a + "/x",
		"app:" + pw + "@" + a + "/x",
	}
}

// argsFor gives the commands that need arguments plausible ones.
var argsFor = map[string][]string{
	"leader show": {"x"}, "leader resign": {"x"}, "semaphore show": {"x"}, "semaphore set": {"x", "2"},
	"semaphore release": {"x", "0"}, "outbox requeue": {"1"}, "saga show": {"g"}, "saga retry": {"g"},
	"saga resolve": {"g", "--yes"}, "jobs rerun": {"--job", "j", "--fire", "2026-01-01T00:00:00Z"},
	"cleanup": {"--older-than", "1h"}, "migrate to": {"3"}, "migrate force": {"3"}, "migrate down": {"--yes"},
	"locks protocol": {}, "sessions revoke": {"--user", "u"}, "epoch advance": {"--yes"},
	"relay drop-slot": {"--group", "g"},
}

// leaves lists every runnable command path below c.
func leaves(c *cobra.Command, prefix string) []string {
	var out []string
	for _, sub := range c.Commands() {
		if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		path := strings.TrimSpace(prefix + " " + sub.Name())
		if sub.HasSubCommands() {
			out = append(out, leaves(sub, path)...)
		} else if sub.Runnable() {
			out = append(out, path)
		}
	}
	return out
}

// No hostile DSN shows its password through any command that takes
// --dsn: on stdout, on stderr (the error as printed), whatever the exit
// status — each DSN against every command.
func TestHostileDSNsNeverPrinted(t *testing.T) {
	t.Parallel()
	const pw = "Hst1le-Pw_7q"
	port := closedPortCLI(t)
	cmds := leaves(newRoot(), "")
	var skip = map[string]bool{"version": true, "demo": true, "bench": true} // no --dsn, or their own servers
	ran := 0
	for _, path := range cmds {
		first := strings.Fields(path)[0]
		if skip[path] || skip[first] {
			continue
		}
		ran++
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			for _, dsn := range hostileDSNs(pw, port) {
				args := append(strings.Fields(path), argsFor[path]...)
				args = append(args, "--dsn", dsn)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				var stdout, stderr bytes.Buffer
				run(ctx, args, &stdout, &stderr)
				cancel()
				if s := stdout.String() + stderr.String(); strings.Contains(s, pw) || strings.Contains(s, "1le-Pw") {
					t.Errorf("%s --dsn %q printed the password:\n%s", path, dsn, s)
				}
			}
		})
	}
	if ran < 20 {
		t.Fatalf("only %d commands found", ran)
	}
}
