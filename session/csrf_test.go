package session_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A state-changing request counts only with the session's CSRF token,
// from the same origin; a rotated session's old token no longer works.
func TestCSRF(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		st, _ := session.NewStore(env.DB, session.Options{})
		ck := session.Cookie{Insecure: true}
		csrf := session.CSRF{}
		var transfers atomic.Int64
		mux := http.NewServeMux()
		mux.HandleFunc("GET /form", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, csrf.Token(r)) })
		mux.HandleFunc("POST /transfer", func(w http.ResponseWriter, r *http.Request) { transfers.Add(1) })
		srv := httptest.NewServer(st.Middleware(ck, csrf.Protect(mux)))
		defer srv.Close()

		tx, _ := env.DB.BeginTx(ctx, nil)
		tok, _, err := st.Create(ctx, tx, "ann", nil)
		if err != nil || tx.Commit() != nil {
			t.Fatal(err)
		}
		get := func(tok string) string {
			req, _ := http.NewRequest("GET", srv.URL+"/form", nil)
			req.AddCookie(&http.Cookie{Name: "sqlcoord_session", Value: tok})
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
		post := func(tok, form, header, origin string) int {
			req, _ := http.NewRequest("POST", srv.URL+"/transfer", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tok != "" {
				req.AddCookie(&http.Cookie{Name: "sqlcoord_session", Value: tok})
			}
			if header != "" {
				req.Header.Set("X-CSRF-Token", header)
			}
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		token := get(tok)
		if token == "" || token == tok || strings.Contains(token, tok) {
			t.Fatalf("CSRF token %q", token)
		}
		other := "A" + token[1:] // another token of the same shape
		if other == token {
			other = "B" + token[1:]
		}
		for name, c := range map[string]struct {
			cookie, form, header, origin string
			want                         int
		}{
			"form field":         {tok, "csrf_token=" + url.QueryEscape(token), "", srv.URL, 200},
			"header":             {tok, "", token, "", 200},
			"no token":           {tok, "", "", "", 403},
			"wrong token":        {tok, "csrf_token=" + url.QueryEscape(token[:len(token)-1]+"x"), "", "", 403},
			"another origin":     {tok, "csrf_token=" + url.QueryEscape(token), "", "https://evil.example", 403},
			"opaque origin":      {tok, "csrf_token=" + url.QueryEscape(token), "", "null", 403},
			"no session":         {"", "csrf_token=" + url.QueryEscape(token), "", "", 403},
			"another's token":    {tok, "csrf_token=" + url.QueryEscape(other), "", "", 403},
			"the session itself": {tok, "csrf_token=" + url.QueryEscape(tok), "", "", 403},
		} {
			before := transfers.Load()
			if got := post(c.cookie, c.form, c.header, c.origin); got != c.want {
				t.Errorf("%s: status %d, want %d", name, got, c.want)
			}
			if changed := transfers.Load() != before; changed != (c.want == 200) {
				t.Errorf("%s: effect applied %v with status %d", name, changed, c.want)
			}
		}
		// login rotation: the old token's CSRF token dies with it
		tx, _ = env.DB.BeginTx(ctx, nil)
		newTok, _, err := st.Rotate(ctx, tx, tok, "ann")
		if err != nil || tx.Commit() != nil {
			t.Fatal(err)
		}
		if got := post(newTok, "csrf_token="+url.QueryEscape(token), "", ""); got != 403 {
			t.Errorf("the pre-rotation token on the new session: %d, want 403", got)
		}
		if got := post(newTok, "csrf_token="+url.QueryEscape(get(newTok)), "", ""); got != 200 {
			t.Errorf("the new token: %d, want 200", got)
		}
	})
}

// Sessions kept through the scs adapter carry the user id its UserID
// reads out of their data, so RevokeAllForUser ends them too.
func TestSCSUserID(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		st, _ := session.NewStore(env.DB, session.Options{})
		scs := st.SCS(session.SCSOptions{UserID: func(b []byte) string {
			var v struct {
				UserID string `json:"user_id"`
			}
			json.Unmarshal(b, &v)
			return v.UserID
		}})
		exp := time.Now().Add(time.Hour)
		anon, _ := session.NewToken()
		ann1, _ := session.NewToken()
		ann2, _ := session.NewToken()
		bob, _ := session.NewToken()
		scs.CommitCtx(ctx, anon, []byte(`{}`), exp)
		scs.CommitCtx(ctx, ann1, []byte(`{}`), exp)
		scs.CommitCtx(ctx, ann1, []byte(`{"user_id":"ann"}`), exp) // logged in after the first commit
		scs.CommitCtx(ctx, ann2, []byte(`{"user_id":"ann"}`), exp)
		scs.CommitCtx(ctx, bob, []byte(`{"user_id":"bob"}`), exp)
		bad, _ := session.NewToken()
		scs.CommitCtx(ctx, bad, []byte(`{"user_id":"x\u0000y"}`), exp) // not valid text: no user id
		n, err := st.RevokeAllForUser(ctx, "ann")
		if err != nil || n != 2 {
			t.Fatalf("revoke ann: %d %v, want 2", n, err)
		}
		for tok, want := range map[string]bool{anon: true, ann1: false, ann2: false, bob: true, bad: true} {
			if _, ok, err := scs.FindCtx(ctx, tok); err != nil || ok != want {
				t.Errorf("after revoking ann: session found %v (%v), want %v", ok, err, want)
			}
		}
	})
}
