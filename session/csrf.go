package session

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
)

// CSRF protects a session's state-changing requests from cross-site
// forgery with a synchronizer token derived from the session token: an
// HMAC-SHA256 keyed by the (secret, HttpOnly) session token, so another
// site can neither read nor compute it, the database stores nothing more,
// and Rotate (at login) changes it. Put Protect inside Store.Middleware:
//
//	h := store.Middleware(cookie, csrf.Protect(app))
//
// and render Token(r) into every form (a hidden field named Field) or
// send it as the Header of script requests.
//
// Protect passes safe methods (GET, HEAD, OPTIONS, TRACE) and refuses
// with 403 any other request that has no session, carries an Origin of
// another host, or lacks the token. It does not cover GET handlers that
// change state (don't write them), nor a site that is itself
// compromised (XSS reads the token like any page content). An anonymous
// visitor posting a login form needs a session first: Create one with
// userID "" when serving the form.
type CSRF struct {
	Field  string // form field; default "csrf_token"
	Header string // request header; default "X-CSRF-Token"
}

func (c CSRF) field() string {
	if c.Field == "" {
		return "csrf_token"
	}
	return c.Field
}

func (c CSRF) header() string {
	if c.Header == "" {
		return "X-CSRF-Token"
	}
	return c.Header
}

// Token is the anti-forgery token of the request's session (loaded by
// Store.Middleware); "" without a session.
func (c CSRF) Token(r *http.Request) string {
	cur, ok := FromContext(r.Context())
	if !ok || cur.Token == "" {
		return ""
	}
	return csrfToken(cur.Token)
}

func csrfToken(sessionToken string) string {
	m := hmac.New(sha256.New, []byte(sessionToken))
	m.Write([]byte("sqlcoord session csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Protect refuses forged unsafe requests (see CSRF).
func (c CSRF) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
			next.ServeHTTP(w, r)
			return
		}
		cur, ok := FromContext(r.Context())
		if !ok || cur.Token == "" {
			http.Error(w, "forbidden: no session", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && o != "null" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				http.Error(w, "forbidden: cross-origin request", http.StatusForbidden)
				return
			}
		} else if o == "null" {
			http.Error(w, "forbidden: opaque origin", http.StatusForbidden)
			return
		}
		got := r.Header.Get(c.header())
		if got == "" {
			got = r.PostFormValue(c.field())
		}
		if got == "" || !hmac.Equal([]byte(got), []byte(csrfToken(cur.Token))) {
			http.Error(w, "forbidden: missing or wrong CSRF token", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
