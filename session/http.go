package session

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/valid"
)

// Cookie tunes the session cookie. The zero value is the safe default:
// Secure, HttpOnly, SameSite=Lax, Path "/", name "sqlcoord_session".
type Cookie struct {
	Name   string
	Path   string
	Domain string
	// Insecure drops the Secure attribute (plain-http development only).
	Insecure bool
	// SameSite; default Lax (Strict breaks links from other sites into a
	// logged-in page; None needs Secure).
	SameSite http.SameSite
}

func (c Cookie) name() string {
	if c.Name == "" {
		return "sqlcoord_session"
	}
	return c.Name
}

func (c Cookie) cookie(value string, expires time.Time, maxAge int) *http.Cookie {
	ss := c.SameSite
	if ss == 0 {
		ss = http.SameSiteLaxMode
	}
	path := c.Path
	if path == "" {
		path = "/"
	}
	return &http.Cookie{Name: c.name(), Value: value, Path: path, Domain: c.Domain, Expires: expires, MaxAge: maxAge,
		Secure: !c.Insecure, HttpOnly: true, SameSite: ss}
}

// Set writes token's cookie (after Create or Rotate); it expires with the
// session's absolute timeout.
func (c Cookie) Set(w http.ResponseWriter, token string, s Session) {
	http.SetCookie(w, c.cookie(token, s.AbsExpiresAt, 0))
}

// Clear removes the cookie (after Revoke).
func (c Cookie) Clear(w http.ResponseWriter) {
	http.SetCookie(w, c.cookie("", time.Unix(0, 0), -1))
}

// Token returns the request's session token ("" when none).
func (c Cookie) Token(r *http.Request) string {
	ck, err := r.Cookie(c.name())
	if err != nil {
		return ""
	}
	return ck.Value
}

type ctxKey struct{}

// Current is the request's session as the middleware loaded it.
type Current struct {
	Token   string
	Session Session
}

// FromContext returns the session the middleware loaded for the request.
func FromContext(ctx context.Context) (Current, bool) {
	c, ok := ctx.Value(ctxKey{}).(Current)
	return c, ok
}

// Middleware loads the session named by the request's cookie (by the
// database clock, renewing it past half the idle window) into the
// request's context, where FromContext finds it. A cookie naming no live
// session (expired, revoked, rotated away) is cleared and the request
// goes on without a session; a database error is a 503.
func (s *Store[TTx]) Middleware(c Cookie, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := c.Token(r)
		if tok == "" {
			next.ServeHTTP(w, r)
			return
		}
		sess, err := s.Load(r.Context(), tok)
		switch {
		case errors.Is(err, ErrNotFound):
			c.Clear(w)
			next.ServeHTTP(w, r)
		case err != nil:
			http.Error(w, "session store unavailable", http.StatusServiceUnavailable)
		default:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, Current{Token: tok, Session: sess})))
		}
	})
}

// SCS adapts the store to alexedwards/scs's Store and CtxStore method
// sets (Find, Commit, Delete and their Ctx variants), so an scs
// SessionManager can keep its sessions here: set manager.Store =
// store.SCS(). scs generates the tokens and passes the absolute expiry
// (its clock); idle expiry and renewal stay the database's.
//
// scs's data is opaque to the store, so a session written through it has
// a user id only when SCSOptions.UserID reads one out of that data; then
// RevokeAllForUser ends it too. With scs's default codec:
//
//	store.SCS(session.SCSOptions{UserID: func(b []byte) string {
//		_, values, err := scs.GobCodec{}.Decode(b)
//		if err != nil {
//			return ""
//		}
//		id, _ := values["user_id"].(string)
//		return id
//	}})
func (s *Store[TTx]) SCS(opts ...SCSOptions) *SCSStore[TTx] {
	a := &SCSStore[TTx]{s: s}
	if len(opts) > 0 {
		a.opt = opts[0]
	}
	return a
}

// SCSOptions tune Store.SCS.
type SCSOptions struct {
	// UserID returns the user id kept in a session's encoded data ("" for
	// none); it is recorded with every Commit. An id that is not valid
	// text of at most 255 bytes is recorded as "".
	UserID func(data []byte) string
}

// SCSStore: see Store.SCS.
type SCSStore[TTx any] struct {
	s   *Store[TTx]
	opt SCSOptions
}

// FindCtx returns the data of a live session.
func (a *SCSStore[TTx]) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	sess, err := a.s.Load(ctx, token)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return sess.Data, true, nil
}

// CommitCtx writes the data, creating the session when needed.
func (a *SCSStore[TTx]) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	h, err := hashToken(token)
	if err != nil {
		return ErrInvalid
	}
	if b == nil {
		b = []byte{}
	}
	exp := expiry.UTC()
	user := ""
	if a.opt.UserID != nil {
		if u := a.opt.UserID(b); valid.Optional("user id", u, 255) == nil {
			user = u
		}
	}
	_, err = a.s.db.Executor().Exec(ctx, a.s.db.Dialect().Q().WebSessionUpsert, h, b, a.s.opt.IdleTimeout.Microseconds(), exp, exp, user)
	return a.s.wrap("commit", err)
}

// DeleteCtx ends the session.
func (a *SCSStore[TTx]) DeleteCtx(ctx context.Context, token string) error {
	return a.s.Revoke(ctx, token)
}

// Find is FindCtx without a context.
func (a *SCSStore[TTx]) Find(token string) ([]byte, bool, error) {
	return a.FindCtx(context.Background(), token)
}

// Commit is CommitCtx without a context.
func (a *SCSStore[TTx]) Commit(token string, b []byte, expiry time.Time) error {
	return a.CommitCtx(context.Background(), token, b, expiry)
}

// Delete is DeleteCtx without a context.
func (a *SCSStore[TTx]) Delete(token string) error { return a.DeleteCtx(context.Background(), token) }
