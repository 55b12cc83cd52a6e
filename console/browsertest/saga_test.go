package browsertest_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqlcoord/sqlcoord/console"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// The sagas page lists live and stuck global transactions with their
// branches; Retry and Resolve go through a confirmation (Resolve asks
// what was done) and change the database; both refuse without the CSRF
// token.
func TestConsoleSagasInBrowser(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c, err := saga.New(env.DB, saga.Options{StuckAfter: 1, RetryBase: time.Millisecond, RetryMax: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c.Register("ledger", func(ctx context.Context, call saga.Call) error {
			switch {
			case call.Op == txn.OpConfirm:
				return errors.New("ledger down: dial tcp 10.0.0.7:5432 password=" + secret)
			case call.Branch == "ship" && call.Op == txn.OpAction:
				return saga.Fail(errors.New("no courier"))
			case call.Op == txn.OpCompensate:
				return saga.Fail(errors.New("refund refused: card expired"))
			}
			return nil
		})
		for _, g := range []saga.Global{
			{GID: "tcc-1", Mode: saga.ModeTCC, Branches: []saga.Branch{{Name: "freeze", Target: "ledger"}}},
			{GID: "order/9", Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "charge", Target: "ledger"}, {Name: "ship", Target: "ledger"}}},
		} {
			err := txn.Do(ctx, env.DB, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error { _, err := c.Begin(ctx, tx, g); return err })
			if err != nil {
				t.Fatal(err)
			}
		}
		c.RunDue(ctx)
		cons, err := console.New(env.DB, console.Options{Listen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(cons)
		defer srv.Close()
		bctx := browser(t)
		fam := env.Family

		text := visit(t, bctx, srv.URL+"/")
		wantText(t, "overview", text, "0 live global transactions", "2 stuck (a person must act)")
		text = visit(t, bctx, srv.URL+"/sagas")
		wantText(t, "sagas", text, "2 stuck", "tcc-1", "order/9", "confirming", "compensating", "card expired", "ledger down")
		if strings.Contains(text, secret) {
			t.Errorf("the sagas page shows a password")
		}
		shot(t, bctx, fam+"-sagas")

		tctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		text = visit(t, bctx, srv.URL+"/saga?gid="+url.QueryEscape("order/9"))
		wantText(t, "saga", text, "no courier", "charge", "ship", "failed", "Retry…", "Resolve by hand…")
		shot(t, bctx, fam+"-saga")
		q := clickThen(t, tctx, chromedp.Click(chromedp.CSS("#resolve")), "#question")
		if !strings.Contains(q, "Resolve order/9 by hand") {
			t.Fatalf("confirmation asks %q", q)
		}
		if in, _ := saga.Get(ctx, env.DB, "order/9"); !in.Stuck {
			t.Fatal("the confirmation page changed the transaction already")
		}
		if err := chromedp.Do(tctx, chromedp.SendKeys(chromedp.CSS("#input-reason"), "refunded by hand, ticket 42")); err != nil {
			t.Fatal(err)
		}
		shot(t, bctx, fam+"-confirm-resolve")
		flash := clickThen(t, tctx, chromedp.Click(chromedp.CSS("#confirm")), "#flash")
		if !strings.Contains(flash, "resolved order/9") {
			t.Errorf("flash %q", flash)
		}
		if in, _ := saga.Get(ctx, env.DB, "order/9"); in.Status != saga.Resolved || !strings.Contains(in.Reason, "ticket 42") {
			t.Errorf("after resolve: %+v", in)
		}

		// Without the token, a retry is refused and changes nothing.
		r, _ := http.NewRequest("POST", srv.URL+"/action/saga-retry", strings.NewReader("gid=tcc-1"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if in, _ := saga.Get(ctx, env.DB, "tcc-1"); resp.StatusCode != http.StatusForbidden || !in.Stuck {
			t.Errorf("retry without CSRF: %d, stuck %v", resp.StatusCode, in.Stuck)
		}
		visit(t, bctx, srv.URL+"/saga?gid=tcc-1")
		clickThen(t, tctx, chromedp.Click(chromedp.CSS("#retry")), "#question")
		flash = clickThen(t, tctx, chromedp.Click(chromedp.CSS("#confirm")), "#flash")
		if !strings.Contains(flash, "made tcc-1 due again") {
			t.Errorf("flash %q", flash)
		}
		if in, _ := saga.Get(ctx, env.DB, "tcc-1"); in.Stuck || in.Status != saga.Confirming {
			t.Errorf("after retry: %+v", in)
		}
		// A gid that does not exist, or is not UTF-8: 404 and 400.
		for q, want := range map[string]int{"gid=nope": 404, "gid=%ff": 400} {
			resp, err := http.Get(srv.URL + "/saga?" + q)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("/saga?%s: %d, want %d", q, resp.StatusCode, want)
			}
		}
	})
}
