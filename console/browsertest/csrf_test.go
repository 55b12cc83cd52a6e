package browsertest_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// session.CSRF in a real browser: the application's own form (token in a
// hidden field) changes state; a page on another origin that posts the
// same form to the application — cookies included, it is the same site —
// is refused and changes nothing.
func TestSessionCSRFInBrowser(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	st, err := session.NewStore(env.DB, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ck := session.Cookie{Insecure: true}
	csrf := session.CSRF{}
	var transfers atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		tx, _ := env.DB.BeginTx(r.Context(), nil)
		defer tx.Rollback()
		tok, s, err := st.Create(r.Context(), tx, "ann", nil)
		if err != nil || tx.Commit() != nil {
			http.Error(w, "login failed", 500)
			return
		}
		ck.Set(w, tok, s)
		http.Redirect(w, r, "/form", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /form", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><h1 id="form">Transfer</h1><form method="post" action="/transfer">
<input type="hidden" name="csrf_token" value="%s"><button id="send">Send</button></form>`, html.EscapeString(csrf.Token(r)))
	})
	mux.HandleFunc("POST /transfer", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><h1 id="done">transferred %d</h1>`, transfers.Add(1))
	})
	app := httptest.NewServer(st.Middleware(ck, csrf.Protect(mux)))
	defer app.Close()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><h1>You won!</h1><form id="f" method="post" action="%s/transfer">
<input type="hidden" name="csrf_token" value="guess"></form><script>document.getElementById("f").submit()</script>`, app.URL)
	}))
	defer evil.Close()

	ctx := browser(t)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(app.URL+"/login"), chromedp.WaitVisible(chromedp.CSS("#form"))); err != nil {
		t.Fatal(err)
	}
	shot(t, ctx, "csrf-form")
	if got := clickThen(t, tctx, chromedp.Click(chromedp.CSS("#send")), "#done"); got != "transferred 1" {
		t.Fatalf("the application's own form: %q", got)
	}
	if err := chromedp.Do(tctx, chromedp.Navigate(evil.URL+"/")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		text := bodyText(t, tctx)
		if strings.Contains(text, "forbidden") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the forged post was not refused; the page shows:\n%s", text)
		}
		time.Sleep(100 * time.Millisecond)
	}
	shot(t, ctx, "csrf-forged")
	if n := transfers.Load(); n != 1 {
		t.Fatalf("%d transfers, want 1: the forged post changed state", n)
	}
}
