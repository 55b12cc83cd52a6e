package browsertest_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/console"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// browser starts headless Chromium (Debian's chromium, installed by make
// setup) and returns a chromedp context for it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if path, err = exec.LookPath("chromium-browser"); err != nil {
			t.Fatal("chromium not installed: run make setup (the console's browser test needs it)")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// shot saves a full-page screenshot under the test's temp dir (and under
// $SQLCOORD_SCREENSHOTS when set, to look at them).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG, below: JPEG
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{t.TempDir()}
	if d := os.Getenv("SQLCOORD_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// visit opens a page, waits for its heading and returns the page's text.
func visit(t *testing.T, ctx context.Context, u string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
		t.Fatalf("visit %s: %v", u, err)
	}
	return bodyText(t, tctx)
}

func bodyText(t *testing.T, ctx context.Context) string {
	t.Helper()
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// clickThen runs a click, waits for the element sel of the next page and
// returns its text.
func clickThen(t *testing.T, ctx context.Context, click chromedp.Action[chromedp.Void], sel string) string {
	t.Helper()
	if err := chromedp.Do(ctx, click, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("click, then wait for %s: %v", sel, err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func wantText(t *testing.T, page, text string, want ...string) {
	t.Helper()
	flat := strings.Join(strings.Fields(text), " ") // a card's number and label are on two lines
	for _, w := range want {
		if !strings.Contains(text, w) && !strings.Contains(flat, w) {
			t.Errorf("%s: page does not show %q:\n%s", page, w, text)
		}
	}
}

const secret = "hunter2-secret-pw"

// seed fills the coordination tables with something of everything and
// returns what the test looks for; the lock stays held (with a waiter)
// until the test ends.
type seeded struct {
	deadID  int64
	failed  time.Time
	jobName string
}

func seed(t *testing.T, env *dbtest.Env) seeded {
	ctx := context.Background()
	db := env.DB
	c := coord.New(db)
	if _, err := c.Acquire(ctx, "orders-leader", "host-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "old-leader", "host-b", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// A held lock and a waiter for it (MariaDB names a locked row only
	// while someone waits for it).
	// The name was used before (its row is committed): a name locked
	// for the very first time is invisible to other sessions until its
	// creating transaction commits.
	first, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.TryLock(ctx, first, "nightly-report"); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if err := c.TryLock(ctx, tx, "nightly-report"); err != nil {
		t.Fatal(err)
	}
	other := env.Open(t)
	go func() {
		tx2, err := other.BeginTx(ctx, nil)
		if err != nil {
			return
		}
		defer tx2.Rollback()
		coord.New(other).Lock(ctx, tx2, "nightly-report", 60*time.Second)
	}()

	// Jobs: an hourly job with a succeeded, a failed and a succeeded slot.
	runs := jobs.NewRuns(db)
	s, err := jobs.ParseSchedule("0 * * * *", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if err := runs.Register(ctx, "cleanup", s, 1); err != nil {
		t.Fatal(err)
	}
	hour := time.Now().UTC().Truncate(time.Hour)
	var sd seeded
	sd.jobName = "cleanup"
	for i, h := range []int{-3, -2, -1} {
		fire := hour.Add(time.Duration(h) * time.Hour)
		run, err := runs.Claim(ctx, "cleanup", fire, 0, 1, "worker-1")
		if err != nil {
			t.Fatal(err)
		}
		var runErr error
		if i == 1 {
			runErr = errors.New("disk full on /var/tmp")
			sd.failed = fire
		}
		time.Sleep(20 * time.Millisecond)
		if err := runs.Finish(ctx, run, runErr); err != nil {
			t.Fatal(err)
		}
	}

	// PostgreSQL: a streaming relay group's slot with no relay attached
	if env.Family == "postgres" {
		if _, err := db.Executor().Exec(ctx, `SELECT pg_create_logical_replication_slot('sqlcoord_console_00000000', 'pgoutput')`); err != nil {
			t.Fatal(err)
		}
	}
	// Outbox: two published, one pending, one dead with a secret in its
	// last error (the console must not show it).
	ob := outbox.New(db)
	for _, topic := range []string{"orders", "orders", "orders", "webhooks"} {
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: topic, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(q string, args ...any) {
		if _, err := db.Executor().Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	now := "clock_timestamp()"
	if env.Family != "postgres" {
		now = "UTC_TIMESTAMP(6)"
	}
	exec(`UPDATE coord_outbox SET state = 'published', published_at = ` + now + `, attempts = 1 WHERE topic = 'orders' AND id IN (SELECT id FROM (SELECT id FROM coord_outbox WHERE topic = 'orders' ORDER BY id LIMIT 2) x)`)
	exec(`UPDATE coord_outbox SET state = 'dead', attempts = 5, last_error = 'HTTP 503 from https://relay:` + secret + `@hooks.example.com/in' WHERE topic = 'webhooks'`)
	if err := db.Executor().QueryRow(ctx, `SELECT id FROM coord_outbox WHERE state = 'dead'`).Scan(&sd.deadID); err != nil {
		t.Fatal(err)
	}

	// An idempotency key left in progress.
	keys := txn.NewKeys(db, txn.KeysOptions{})
	ktx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Begin(ctx, ktx, "payments", "charge-42", txn.Fingerprint([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	if err := ktx.Commit(); err != nil {
		t.Fatal(err)
	}

	// A member and a web session.
	m, err := membership.Join(ctx, db, "workers", membership.Options{ID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Leave(context.Background()) })
	// what a relay listening for NOTIFY registers in
	rl, err := membership.Join(ctx, db, "sqlcoord.outbox.listeners", membership.Options{ID: "relay-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Leave(context.Background()) })
	store, err := session.NewStore(db, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Create(ctx, stx, "alice", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Wait until the waiter is actually waiting.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		q := `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`
		if env.Family != "postgres" {
			q = `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'`
		}
		if err := db.Executor().QueryRow(ctx, q).Scan(&n); err == nil && n > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return sd
}

func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		sd := seed(t, env)
		c, err := console.New(env.DB, console.Options{Listen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(c)
		defer srv.Close()
		ctx := browser(t)
		fam := env.Family

		t.Run("overview shows every area", func(t *testing.T) {
			text := visit(t, ctx, srv.URL+"/")
			wantText(t, "overview", text, "1 live lease", "1 lock name held", "outbox pending", "1 key in progress", "cleanup", "Published per minute", "1 live session")
			noClumsyPlurals(t, "overview", text)
			shot(t, ctx, fam+"-overview")
		})
		t.Run("leases with holder, token and time left by the database clock", func(t *testing.T) {
			text := visit(t, ctx, srv.URL+"/leases")
			wantText(t, "leases", text, "orders-leader", "host-a", "old-leader", "expired")
			shot(t, ctx, fam+"-leases")
		})
		t.Run("the held lock and its waiter", func(t *testing.T) {
			text := visit(t, ctx, srv.URL+"/locks")
			held, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#held")))
			if err != nil {
				t.Fatalf("no table of held locks: %v\n%s", err, text)
			}
			wantText(t, "locks held", held, "nightly-report")
			if strings.Contains(text, "Nobody waits for a lock") {
				t.Errorf("locks: the waiter is not shown:\n%s", text)
			}
			shot(t, ctx, fam+"-locks")
		})
		t.Run("jobs and a job's runs", func(t *testing.T) {
			text := visit(t, ctx, srv.URL+"/jobs")
			wantText(t, "jobs", text, "cleanup", "0 * * * *")
			text = visit(t, ctx, srv.URL+"/jobs/cleanup")
			wantText(t, "job", text, "disk full on /var/tmp", "succeeded", "failed", "Run duration", "1 shard per slot", "0 of 1")
			noClumsyPlurals(t, "job", text)
			// the chart says what a bar is and labels its ends in words
			svg, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("svg.chart")))
			if !strings.Contains(svg, "one bar per run") || !strings.Contains(svg, "UTC, shard 0 of 1") {
				t.Errorf("job chart without axis words:\n%s", svg)
			}
			// every Re-run button on one line (no wrap)
			tall, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("a.button")].filter(b => b.getClientRects().length > 1 || b.getBoundingClientRect().height > 1.8 * (parseFloat(getComputedStyle(b).fontSize) * 1.6)).map(b => b.textContent)`))
			if err != nil {
				t.Fatal(err)
			}
			if len(tall) > 0 {
				t.Errorf("buttons wrap onto two lines: %q", tall)
			}
			shot(t, ctx, fam+"-job")
		})
		t.Run("outbox counts, charts, dead letters without secrets", func(t *testing.T) {
			text := visit(t, ctx, srv.URL+"/outbox")
			wantText(t, "outbox", text, "webhooks", "HTTP 503", "hooks.example.com", "Published per minute")
			if fam == "postgres" {
				wantText(t, "outbox slots", text, "Streaming relays", "sqlcoord_console_00000000", "none attached")
			}
			if strings.Contains(text, secret) {
				t.Errorf("outbox page shows the password in a last error")
			}
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
			if strings.Contains(html, secret) {
				t.Errorf("outbox page's HTML carries the password")
			}
			shot(t, ctx, fam+"-outbox")
		})
		t.Run("idempotency keys in progress", func(t *testing.T) {
			text := visit(t, ctx, srv.URL+"/keys")
			wantText(t, "keys", text, "payments", "charge-42", "in progress")
			shot(t, ctx, fam+"-keys")
		})
		t.Run("leaders and semaphores", func(t *testing.T) {
			db := env.DB
			cc := coord.New(db)
			el, err := cc.Election("scheduler", coord.ElectionOptions{ID: "node-a", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			lead, err := el.Campaign(ctx, "10.0.0.7:8080")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lead.Resign(context.Background()) })
			sem, err := cc.Semaphore("exports", 3)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sem.TryAcquire(ctx, "worker-1", time.Minute); err != nil {
				t.Fatal(err)
			}
			// a candidate waiting in the election's queue
			wctx, stop := context.WithCancel(ctx)
			t.Cleanup(stop)
			follower, _ := coord.New(db).Election("scheduler", coord.ElectionOptions{ID: "node-b", TTL: time.Minute})
			go follower.Campaign(wctx, "")
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if ws, _ := follower.Waiters(ctx); len(ws) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the candidate did not queue")
				}
			}
			text := visit(t, ctx, srv.URL+"/elections")
			wantText(t, "elections", text, "scheduler", "node-a", "10.0.0.7:8080", "exports", "node-b", "Waiting, in queue order")
			noClumsyPlurals(t, "elections", text)
			shot(t, ctx, fam+"-elections")
		})
		t.Run("members and sessions", func(t *testing.T) {
			text := visit(t, ctx, srv.URL+"/members")
			wantText(t, "members", text, "workers", "1 live session", "sqlcoord.outbox.listeners", "sqlcoord's own: outbox relays listening for NOTIFY")
			noClumsyPlurals(t, "members", text)
			shot(t, ctx, fam+"-members")
		})
		t.Run("requeue goes through the confirmation and changes the database", func(t *testing.T) {
			visit(t, ctx, srv.URL+"/outbox")
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			q := clickThen(t, tctx, chromedp.Click(chromedp.CSS("#requeue-"+itoa(sd.deadID))), "#question")
			if !strings.Contains(q, "Requeue dead message "+itoa(sd.deadID)) {
				t.Fatalf("confirmation asks %q", q)
			}
			if st := state(t, env.DB, sd.deadID); st != "dead" {
				t.Fatalf("the confirmation page changed the message already: %s", st)
			}
			shot(t, ctx, fam+"-confirm-requeue")
			flash := clickThen(t, tctx, chromedp.Click(chromedp.CSS("#confirm")), "#flash")
			if !strings.Contains(flash, "requeued 1") {
				t.Errorf("flash %q", flash)
			}
			if st := state(t, env.DB, sd.deadID); st != "pending" {
				t.Errorf("message %d is %s after the requeue, want pending", sd.deadID, st)
			}
		})
		t.Run("re-run of a failed slot goes through the confirmation and marks it", func(t *testing.T) {
			visit(t, ctx, srv.URL+"/jobs/cleanup")
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			q := clickThen(t, tctx, chromedp.Click(chromedp.Search(`//table[@id="runs"]//tr[.//span[text()="failed"]]//a`)), "#question")
			if !strings.Contains(q, sd.failed.Format(time.RFC3339)) {
				t.Fatalf("confirmation asks %q, want the failed slot %s", q, sd.failed.Format(time.RFC3339))
			}
			shot(t, ctx, fam+"-confirm-rerun")
			flash := clickThen(t, tctx, chromedp.Click(chromedp.CSS("#confirm")), "#flash")
			if !strings.Contains(flash, "marked 1 shard run") {
				t.Errorf("flash %q", flash)
			}
			recs, err := jobs.NewRuns(env.DB).List(context.Background(), "cleanup", sd.failed, sd.failed.Add(time.Microsecond))
			if err != nil || len(recs) != 1 || recs[0].Status != jobs.Rerun {
				t.Errorf("failed slot after re-run: %+v %v, want status rerun", recs, err)
			}
		})
		t.Run("an action without the CSRF token, or from another origin, is refused", func(t *testing.T) {
			before := state(t, env.DB, sd.deadID)
			for name, req := range map[string]func() *http.Request{
				"no token": func() *http.Request {
					r, _ := http.NewRequest("POST", srv.URL+"/action/requeue", strings.NewReader("id=all"))
					return r
				},
				"cross-site": func() *http.Request {
					r, _ := http.NewRequest("POST", srv.URL+"/action/requeue", strings.NewReader("id=all&csrf="+csrfOf(t, srv.URL)))
					r.Header.Set("Origin", "https://evil.example")
					return r
				},
			} {
				r := req()
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s: status %d, want 403", name, resp.StatusCode)
				}
			}
			if got := state(t, env.DB, sd.deadID); got != before {
				t.Errorf("refused action changed the database: %s → %s", before, got)
			}
		})
		t.Run("a mutation is never a GET", func(t *testing.T) {
			resp, err := http.Get(srv.URL + "/action/requeue?id=all")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("GET /action/requeue: %d, want 405", resp.StatusCode)
			}
		})
		t.Run("without a token only loopback host names are served", func(t *testing.T) {
			r, _ := http.NewRequest("GET", srv.URL+"/", nil)
			r.Host = "rebound.evil.example"
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("Host rebound.evil.example: %d, want 403", resp.StatusCode)
			}
		})
	})
}

func TestConsoleTokenOffLoopback(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	if _, err := console.New(env.DB, console.Options{Listen: "0.0.0.0:8080"}); !errors.Is(err, console.ErrTokenRequired) {
		t.Fatalf("off loopback without a token: %v, want ErrTokenRequired", err)
	}
	if _, err := console.New(env.DB, console.Options{Listen: "0.0.0.0:8080", Token: "short"}); !errors.Is(err, console.ErrInvalid) {
		t.Fatalf("short token: %v, want ErrInvalid", err)
	}
	const token = "0123456789abcdef-token"
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(env.DB, console.Options{Listen: ln.Addr().String(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: c}
	go srv.Serve(ln)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	base := "http://127.0.0.1:" + port
	ctx := browser(t)

	t.Run("no token: sign-in page, no data", func(t *testing.T) {
		text := visit(t, ctx, base+"/outbox")
		wantText(t, "sign-in", text, "needs its token")
		if strings.Contains(text, "dead letters") {
			t.Errorf("data shown without the token:\n%s", text)
		}
		shot(t, ctx, "signin")
		resp, err := http.Get(base + "/outbox")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET without token: %d, want 401", resp.StatusCode)
		}
	})
	t.Run("a wrong token is refused", func(t *testing.T) {
		text := visit(t, ctx, base+"/?token=wrong-wrong-wrong-wrong")
		wantText(t, "wrong token", text, "needs its token")
	})
	t.Run("signing in with the token opens the console", func(t *testing.T) {
		visit(t, ctx, base+"/")
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(tctx, chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#signin")),
			chromedp.WaitVisible(chromedp.CSS(".cards"))); err != nil {
			t.Fatal(err)
		}
		text := bodyText(t, tctx)
		wantText(t, "overview after sign-in", text, "outbox pending")
	})
	t.Run("bearer token works for scripts", func(t *testing.T) {
		r, _ := http.NewRequest("GET", base+"/leases", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("bearer: %d", resp.StatusCode)
		}
	})
}

func state(t *testing.T, db *sqlcoord.DB, id int64) string {
	t.Helper()
	var s string
	if err := db.Executor().QueryRow(context.Background(), `SELECT state FROM coord_outbox WHERE id = `+db.Dialect().Placeholder(1), id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// csrfOf reads the CSRF token from a confirmation page, as a page of the
// console itself would carry it.
func csrfOf(t *testing.T, base string) string {
	resp, err := http.Get(base + "/confirm/requeue?id=all")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 1<<16)
	n, _ := resp.Body.Read(b)
	s := string(b[:n])
	i := strings.Index(s, `name="csrf" value="`)
	if i < 0 {
		t.Fatalf("no csrf field in the confirmation page")
	}
	s = s[i+len(`name="csrf" value="`):]
	v, _ := url.QueryUnescape(s[:strings.Index(s, `"`)])
	return v
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Hostile input gets a clear status and an escaped message, never a 500
// or the input echoed as markup.
func TestConsoleBadInput(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	c, err := console.New(env.DB, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	for path, want := range map[string]int{
		"/confirm/requeue?id=-5":                            http.StatusBadRequest,
		"/confirm/requeue?id=%3Cscript%3E":                  http.StatusBadRequest,
		"/confirm/requeue?id=999999":                        http.StatusNotFound,
		"/confirm/rerun?job=nope&fire=2026-01-01T00:00:00Z": http.StatusNotFound,
		"/confirm/rerun?job=x&fire=yesterday":               http.StatusBadRequest,
		"/jobs/%3Cscript%3Ealert(1)%3C%2Fscript%3E":         http.StatusNotFound,
		"/jobs/%FF%FE":  http.StatusBadRequest,
		"/no-such-page": http.StatusNotFound,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1<<16)
		n, _ := resp.Body.Read(b)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
		if strings.Contains(string(b[:n]), "<script>") {
			t.Errorf("%s: input echoed as markup", path)
		}
	}
}

// noClumsyPlurals: no "1 rows", no "(s)".
func noClumsyPlurals(t *testing.T, page, text string) {
	t.Helper()
	flat := strings.Join(strings.Fields(text), " ")
	if m := regexp.MustCompile(`\b1 (live |dead |expired |signed-in |member |lock )?(rows|leases|sessions|users|groups|names|letters|jobs|keys|shards|runs|messages)\b|\(s\)`).FindString(flat); m != "" {
		t.Errorf("%s: %q reads badly:\n%s", page, m, text)
	}
}
