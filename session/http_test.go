package session_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// app is one instance of a web application using the store: its own pool.
func app(t *testing.T, db *sqlcoord.DB) *httptest.Server {
	st, err := session.NewStore(db, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ck := session.Cookie{Insecure: true} // httptest is plain http
	mux := http.NewServeMux()
	mux.HandleFunc("POST /anon", func(w http.ResponseWriter, r *http.Request) {
		tx, _ := db.BeginTx(r.Context(), nil)
		defer tx.Rollback()
		tok, s, err := st.Create(r.Context(), tx, "", nil)
		if err != nil || tx.Commit() != nil {
			http.Error(w, "create", 500)
			return
		}
		ck.Set(w, tok, s)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		user := r.URL.Query().Get("user")
		tx, _ := db.BeginTx(r.Context(), nil)
		defer tx.Rollback()
		var tok string
		var s session.Session
		var err error
		if cur, ok := session.FromContext(r.Context()); ok {
			tok, s, err = st.Rotate(r.Context(), tx, cur.Token, user) // never keep a pre-login token
		} else {
			tok, s, err = st.Create(r.Context(), tx, user, nil)
		}
		if err != nil || tx.Commit() != nil {
			http.Error(w, "login", 500)
			return
		}
		ck.Set(w, tok, s)
	})
	mux.HandleFunc("GET /me", func(w http.ResponseWriter, r *http.Request) {
		cur, ok := session.FromContext(r.Context())
		if !ok || cur.Session.UserID == "" {
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, cur.Session.UserID)
	})
	mux.HandleFunc("POST /logout-everywhere", func(w http.ResponseWriter, r *http.Request) {
		cur, ok := session.FromContext(r.Context())
		if !ok {
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		st.RevokeAllForUser(r.Context(), cur.Session.UserID)
		ck.Clear(w)
	})
	srv := httptest.NewServer(st.Middleware(ck, mux))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "sqlcoord_session", Value: token})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func cookieOf(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == "sqlcoord_session" && c.Value != "" {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", resp.Header["Set-Cookie"])
	return nil
}

// A real HTTP server, two instances of the application.
func TestHTTP(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		a, b := app(t, env.DB), app(t, env.Open(t))

		t.Run("cookie attributes", func(t *testing.T) {
			resp, _ := do(t, "POST", a.URL+"/login?user=ann", "")
			h := strings.Join(resp.Header["Set-Cookie"], "; ")
			if !strings.Contains(h, "HttpOnly") || !strings.Contains(h, "SameSite=Lax") {
				t.Fatalf("Set-Cookie: %s", h)
			}
			rec := httptest.NewRecorder()
			session.Cookie{}.Set(rec, "tok", session.Session{AbsExpiresAt: time.Now().Add(time.Hour)})
			if h := rec.Header().Get("Set-Cookie"); !strings.Contains(h, "Secure") || !strings.Contains(h, "HttpOnly") {
				t.Fatalf("default cookie not Secure+HttpOnly: %s", h)
			}
		})

		t.Run("fixation: a token set before login is useless after it", func(t *testing.T) {
			resp, _ := do(t, "POST", a.URL+"/anon", "")
			planted := cookieOf(t, resp).Value // the attacker's token, planted in the victim's browser
			resp, _ = do(t, "POST", a.URL+"/login?user=victim", planted)
			fresh := cookieOf(t, resp).Value
			if fresh == planted {
				t.Fatal("login kept the pre-login token")
			}
			for _, srv := range []*httptest.Server{a, b} {
				if resp, _ := do(t, "GET", srv.URL+"/me", planted); resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("planted token after login: %d, want 401", resp.StatusCode)
				}
				if resp, body := do(t, "GET", srv.URL+"/me", fresh); resp.StatusCode != 200 || body != "victim" {
					t.Fatalf("victim's new token: %d %q", resp.StatusCode, body)
				}
			}
		})

		t.Run("logout everywhere reaches the next request of every instance", func(t *testing.T) {
			r1, _ := do(t, "POST", a.URL+"/login?user=zoe", "")
			r2, _ := do(t, "POST", b.URL+"/login?user=zoe", "")
			t1, t2 := cookieOf(t, r1).Value, cookieOf(t, r2).Value
			if resp, _ := do(t, "GET", b.URL+"/me", t1); resp.StatusCode != 200 {
				t.Fatalf("session from instance a on instance b: %d", resp.StatusCode)
			}
			if resp, _ := do(t, "POST", a.URL+"/logout-everywhere", t1); resp.StatusCode != 200 {
				t.Fatalf("logout: %d", resp.StatusCode)
			}
			for _, srv := range []*httptest.Server{a, b} {
				for _, tok := range []string{t1, t2} {
					if resp, _ := do(t, "GET", srv.URL+"/me", tok); resp.StatusCode != http.StatusUnauthorized {
						t.Fatalf("after logout everywhere: %d, want 401", resp.StatusCode)
					}
				}
			}
		})

		t.Run("scs store method set", func(t *testing.T) {
			st, _ := session.NewStore(env.DB, session.Options{})
			var s interface {
				Find(string) ([]byte, bool, error)
				Commit(string, []byte, time.Time) error
				Delete(string) error
				FindCtx(context.Context, string) ([]byte, bool, error)
				CommitCtx(context.Context, string, []byte, time.Time) error
				DeleteCtx(context.Context, string) error
			} = st.SCS()
			tok, _ := session.NewToken()
			if err := s.Commit(tok, []byte("v1"), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(tok, []byte("v2"), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if b, ok, err := s.Find(tok); err != nil || !ok || string(b) != "v2" {
				t.Fatalf("find: %q %v %v", b, ok, err)
			}
			if err := s.Delete(tok); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := s.Find(tok); err != nil || ok {
				t.Fatalf("after delete: %v %v", ok, err)
			}
		})
	})
}
