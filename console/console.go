// Package console is sqlcoord's web console: an http.Handler that shows,
// by the database's clock, what the coordination tables hold — leases,
// row locks held and waited for, scheduled job runs, the outbox, pending
// idempotency keys, members and web sessions — and lets an operator
// requeue dead outbox messages and re-run job slots, each behind a
// confirmation page.
//
// Everything is server-rendered HTML with inline SVG charts and one
// embedded stylesheet: no script, nothing fetched from elsewhere.
//
// Access: a console listening on a loopback address may run without a
// token (requests must then name a loopback host, which defeats DNS
// rebinding); on any other address New refuses to start without one
// (ErrTokenRequired). With a token, a request carries it as
// "Authorization: Bearer …", or once as ?token=… (or through the sign-in
// form), which sets an HttpOnly, SameSite=Strict cookie. Every mutating
// action is a POST carrying a per-process CSRF token, refused from another
// origin, and logged (Options.Logger) with the remote address.
//
// Not covered: users and roles (one token grants everything the console
// does), TLS (put it behind your proxy or keep it on loopback).
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/outbox"
)

var (
	// ErrTokenRequired: the console would listen on a non-loopback address
	// without a token.
	ErrTokenRequired = errors.New("console: a token is required when listening off loopback")
	// ErrInvalid: an invalid option.
	ErrInvalid = errors.New("console: invalid")
)

// Options configure a console.
type Options struct {
	// Listen is the address the console is served on ("127.0.0.1:8080");
	// it decides whether a token is required. Empty: loopback.
	Listen string
	// Token, when set, is required on every request (on any address).
	// At least 16 characters.
	Token string
	// Logger receives every mutating action at Info and page errors at
	// Warn. Nil: slog.Default().
	Logger *slog.Logger
	// Limit is the most rows a table shows (default 200).
	Limit int
	// ReadOnly hides and refuses the mutating actions.
	ReadOnly bool
}

// Console is the web console's http.Handler.
type Console struct {
	db     sqlcoord.Base
	opt    Options
	csrf   string
	cookie string // value of the sign-in cookie (derived from the token)
	mux    *http.ServeMux
	tmpl   map[string]*template.Template
	log    *slog.Logger
}

//go:embed assets
var assets embed.FS

const cookieName = "sqlcoord_console"

// New returns the console of db.
func New(db sqlcoord.Base, opt Options) (*Console, error) {
	if db == nil {
		return nil, errs.Errorf("%w: nil database", ErrInvalid)
	}
	if opt.Limit == 0 {
		opt.Limit = 200
	}
	if err := opt.Check(); err != nil {
		return nil, err
	}
	c := &Console{db: db, opt: opt, log: opt.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	c.csrf = mac(secret, "csrf")
	if opt.Token != "" {
		c.cookie = mac([]byte(opt.Token), "sqlcoord console session")
	}
	var err error
	if c.tmpl, err = parseTemplates(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

// Check reports what New would refuse in the options without a database:
// ErrTokenRequired off loopback without a token, ErrInvalid for a bad
// address, a short token or a limit out of range.
func (opt Options) Check() error {
	if opt.Limit < 0 || opt.Limit > 10000 {
		return errs.Errorf("%w: Limit %d: want 1 to 10000", ErrInvalid, opt.Limit)
	}
	if opt.Token != "" && len(opt.Token) < 16 {
		return errs.Errorf("%w: token shorter than 16 characters", ErrInvalid)
	}
	loop, err := IsLoopback(opt.Listen)
	if err != nil {
		return err
	}
	if !loop && opt.Token == "" {
		return errs.Errorf("%w (listen %q)", ErrTokenRequired, opt.Listen)
	}
	return nil
}

func mac(key []byte, msg string) string {
	h := hmac.New(sha256.New, key)
	io.WriteString(h, msg)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// IsLoopback reports whether a listen address ("host:port"; empty host
// means every interface) is on loopback only. "localhost" counts as
// loopback.
func IsLoopback(listen string) (bool, error) {
	if listen == "" {
		return true, nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, errs.Errorf("%w: listen address %q: %v", ErrInvalid, listen, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", c.page("overview", c.overview))
	m.HandleFunc("GET /leases", c.page("leases", c.leases))
	m.HandleFunc("GET /locks", c.page("locks", c.locks))
	m.HandleFunc("GET /jobs", c.page("jobs", c.jobList))
	m.HandleFunc("GET /jobs/{job}", c.page("job", c.job))
	m.HandleFunc("GET /outbox", c.page("outbox", c.outbox))
	m.HandleFunc("GET /keys", c.page("keys", c.keys))
	m.HandleFunc("GET /members", c.page("members", c.members))
	m.HandleFunc("GET /elections", c.page("elections", c.elections))
	m.HandleFunc("GET /confirm/requeue", c.page("confirm", c.confirmRequeue))
	m.HandleFunc("GET /confirm/rerun", c.page("confirm", c.confirmRerun))
	m.HandleFunc("POST /action/requeue", c.action(c.doRequeue))
	m.HandleFunc("POST /action/rerun", c.action(c.doRerun))
	m.HandleFunc("GET /sagas", c.page("sagas", c.sagas))
	m.HandleFunc("GET /saga", c.page("saga", c.sagaPage))
	m.HandleFunc("GET /confirm/saga-retry", c.page("confirm", c.confirmSaga("retry")))
	m.HandleFunc("GET /confirm/saga-resolve", c.page("confirm", c.confirmSaga("resolve")))
	m.HandleFunc("POST /action/saga-retry", c.action(c.doSaga("retry")))
	m.HandleFunc("POST /action/saga-resolve", c.action(c.doSaga("resolve")))
	m.HandleFunc("POST /signin", c.signin)
	m.HandleFunc("GET /assets/console.css", func(w http.ResponseWriter, r *http.Request) {
		b, _ := assets.ReadFile("assets/console.css")
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Write(b)
	})
	c.mux = m
}

// ServeHTTP checks the host and the token, then serves the page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" would make browsers send Origin: null on our own forms
	h.Set("X-Frame-Options", "DENY")
	if c.opt.Token == "" && !loopbackHost(r.Host) {
		// No token: only a browser that asked for a loopback name gets
		// in (a DNS-rebound name pointing at 127.0.0.1 does not).
		http.Error(w, "console: host not allowed (use 127.0.0.1 or localhost)", http.StatusForbidden)
		return
	}
	if (r.URL.Path == "/signin" && r.Method == http.MethodPost) || r.URL.Path == "/assets/console.css" {
		c.mux.ServeHTTP(w, r)
		return
	}
	if c.opt.Token != "" && !c.authorized(w, r) {
		return
	}
	c.mux.ServeHTTP(w, r)
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c *Console) tokenOK(got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(c.opt.Token)) == 1
}

// authorized admits a request with the bearer token or the sign-in
// cookie; ?token= sets the cookie and redirects to the same page without
// the token in its address. Otherwise it answers 401 with a sign-in form.
func (c *Console) authorized(w http.ResponseWriter, r *http.Request) bool {
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") && c.tokenOK(strings.TrimPrefix(a, "Bearer ")) {
		return true
	}
	if ck, err := r.Cookie(cookieName); err == nil && subtle.ConstantTimeCompare([]byte(ck.Value), []byte(c.cookie)) == 1 {
		return true
	}
	if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet {
		if c.tokenOK(t) {
			c.setCookie(w, r)
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return false
		}
		c.log.Warn("console: wrong token", "remote", r.RemoteAddr)
	}
	w.WriteHeader(http.StatusUnauthorized)
	c.render(w, r, "signin", view{Page: "signin", Title: "Sign in", Data: signinData{Next: r.URL.Path}})
	return false
}

type signinData struct {
	Next   string
	Failed bool
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.cookie, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 12 * 3600})
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	if c.opt.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if !c.sameOrigin(r) || !c.tokenOK(r.PostFormValue("token")) {
		c.log.Warn("console: sign-in refused", "remote", r.RemoteAddr)
		w.WriteHeader(http.StatusUnauthorized)
		c.render(w, r, "signin", view{Page: "signin", Title: "Sign in", Data: signinData{Next: "/", Failed: true}})
		return
	}
	c.setCookie(w, r)
	next := r.PostFormValue("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// sameOrigin refuses a request a browser marks as coming from another
// site (Sec-Fetch-Site, Origin).
func (c *Console) sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

// view is what every page template gets.
type view struct {
	Page     string
	Title    string
	Dialect  string
	Now      time.Time
	CSRF     string
	ReadOnly bool
	Flash    string
	Error    string
	Data     any
}

// page runs load under the request's context (bounded to 10 s) and
// renders its data with the page's template. A load error is shown on
// the page (redacted), not as a bare 500.
func (c *Console) page(name string, load func(ctx context.Context, r *http.Request, now time.Time) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		v := view{Page: name, Dialect: c.db.Dialect().Name(), CSRF: c.csrf, ReadOnly: c.opt.ReadOnly, Flash: r.URL.Query().Get("done")}
		// One reading of the database clock serves the header and the
		// page's own ages and windows.
		now, err := c.now(ctx)
		v.Now, v.Title = now, "sqlcoord console"
		if err == nil {
			v.Title, v.Data, err = load(ctx, r, now)
		}
		status := http.StatusOK
		if err != nil {
			var nf notFound
			switch {
			case errors.As(err, &nf), errors.Is(err, jobs.ErrUnknownJob):
				status = http.StatusNotFound
			case errors.Is(err, ErrInvalid), errors.Is(err, jobs.ErrInvalid), errors.Is(err, jobs.ErrNotOnSchedule):
				status = http.StatusBadRequest
			}
			v.Error = redact.Text(err.Error())
			c.log.Warn("console: page failed", "page", name, "err", v.Error)
		}
		w.WriteHeader(status)
		c.render(w, r, name, v)
	}
}

type notFound struct{ error }

func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, v any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := c.tmpl[name].ExecuteTemplate(w, "layout", v); err != nil {
		c.log.Warn("console: render", "page", name, "err", err)
	}
}

// action checks the CSRF token and the origin of a POST, runs the
// mutation, logs it and redirects (303) to the page it returns.
func (c *Console) action(do func(ctx context.Context, r *http.Request) (next, done string, err error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.opt.ReadOnly {
			http.Error(w, "console: read-only", http.StatusForbidden)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, "console: bad form", http.StatusBadRequest)
			return
		}
		if !c.sameOrigin(r) || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(c.csrf)) != 1 {
			c.log.Warn("console: action refused (CSRF)", "path", r.URL.Path, "remote", r.RemoteAddr)
			http.Error(w, "console: missing or wrong CSRF token; reload the page", http.StatusForbidden)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		next, done, err := do(ctx, r)
		if err != nil {
			msg := redact.Text(err.Error())
			c.log.Warn("console: action failed", "path", r.URL.Path, "remote", r.RemoteAddr, "err", msg)
			status := http.StatusInternalServerError
			if errors.Is(err, ErrInvalid) || errors.Is(err, jobs.ErrInvalid) || errors.Is(err, jobs.ErrUnknownJob) || errors.Is(err, jobs.ErrNotOnSchedule) {
				status = http.StatusBadRequest
			}
			w.WriteHeader(status)
			c.render(w, r, "confirm", view{Page: "confirm", Title: "Action failed", Dialect: c.db.Dialect().Name(), CSRF: c.csrf, Error: msg})
			return
		}
		c.log.Info("console: "+done, "path", r.URL.Path, "remote", r.RemoteAddr)
		sep := "?"
		if strings.Contains(next, "?") {
			sep = "&"
		}
		http.Redirect(w, r, next+sep+"done="+url.QueryEscape(done), http.StatusSeeOther)
	}
}

// confirmation is the data of a confirmation page.
type confirmation struct {
	Question string
	Details  [][2]string
	Action   string
	Fields   [][2]string
	Input    *input // a text the person must type (nil: none)
	Back     string
}

// input is a required text field of a confirmation.
type input struct{ Name, Label string }

func parseID(s string) (int64, error) {
	if s == "all" {
		return 0, nil
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, errs.Errorf("%w: message id %q", ErrInvalid, s)
	}
	return id, nil
}

func (c *Console) confirmRequeue(ctx context.Context, r *http.Request, _ time.Time) (string, any, error) {
	id, err := parseID(r.URL.Query().Get("id"))
	if err != nil {
		return "Requeue", nil, err
	}
	cf := confirmation{Action: "/action/requeue", Back: "/outbox", Fields: [][2]string{{"id", r.URL.Query().Get("id")}}}
	dead, err := outbox.NewAdmin(c.db).Dead(ctx, c.opt.Limit)
	if err != nil {
		return "Requeue", nil, err
	}
	if id == 0 {
		cf.Question = fmt.Sprintf("Requeue all %s listed? They become pending with a fresh attempt budget and the relay publishes them again.", plural(len(dead), "dead message", "dead messages"))
		return "Requeue", cf, nil
	}
	for _, d := range dead {
		if d.ID == id {
			cf.Question = fmt.Sprintf("Requeue dead message %d? It becomes pending with a fresh attempt budget and the relay publishes it again.", id)
			cf.Details = [][2]string{{"topic", d.Topic}, {"key", d.Key}, {"message id", d.UUID}, {"attempts", strconv.Itoa(d.Attempts)}, {"last error", redact.Text(d.LastError)}}
			return "Requeue", cf, nil
		}
	}
	return "Requeue", nil, notFound{fmt.Errorf("no dead message %d", id)}
}

func (c *Console) doRequeue(ctx context.Context, r *http.Request) (string, string, error) {
	id, err := parseID(r.PostForm.Get("id"))
	if err != nil {
		return "", "", err
	}
	n, err := outbox.NewAdmin(c.db).Requeue(ctx, id)
	if err != nil {
		return "", "", err
	}
	what := "requeued " + plural(n, "dead message", "dead messages")
	if id > 0 {
		what = fmt.Sprintf("requeued %s (id %d)", plural(n, "dead message", "dead messages"), id)
	}
	return "/outbox", what, nil
}

func parseRerun(job, fire string) (time.Time, error) {
	if job == "" {
		return time.Time{}, errs.Errorf("%w: no job", ErrInvalid)
	}
	t, err := time.Parse(time.RFC3339Nano, fire)
	if err != nil {
		return time.Time{}, errs.Errorf("%w: fire time %q: %v", ErrInvalid, fire, err)
	}
	return t, nil
}

func (c *Console) confirmRerun(ctx context.Context, r *http.Request, _ time.Time) (string, any, error) {
	job, fireS := r.URL.Query().Get("job"), r.URL.Query().Get("fire")
	fire, err := parseRerun(job, fireS)
	if err != nil {
		return "Re-run", nil, err
	}
	def, s, err := jobs.NewRuns(c.db).Definition(ctx, job)
	if err != nil {
		return "Re-run", nil, err
	}
	if !s.OnSchedule(fire) {
		return "Re-run", nil, errs.Errorf("%w: %s at %s", jobs.ErrNotOnSchedule, job, fire.UTC().Format(time.RFC3339Nano))
	}
	return "Re-run", confirmation{
		Question: fmt.Sprintf("Run slot %s of job %s again? Every shard not running is marked for a re-run; a live scheduler of the job picks it up.", fire.UTC().Format(time.RFC3339), job),
		Details:  [][2]string{{"job", job}, {"schedule", def.Schedule + " (" + def.Location + ")"}, {"shards", strconv.Itoa(def.Shards)}, {"fire time (UTC)", fire.UTC().Format(time.RFC3339Nano)}},
		Action:   "/action/rerun", Back: "/jobs/" + url.PathEscape(job),
		Fields: [][2]string{{"job", job}, {"fire", fireS}},
	}, nil
}

func (c *Console) doRerun(ctx context.Context, r *http.Request) (string, string, error) {
	job := r.PostForm.Get("job")
	fire, err := parseRerun(job, r.PostForm.Get("fire"))
	if err != nil {
		return "", "", err
	}
	n, err := jobs.NewRuns(c.db).MarkRerun(ctx, job, fire, 0)
	if err != nil {
		return "", "", err
	}
	return "/jobs/" + url.PathEscape(job), fmt.Sprintf("marked %s of %s at %s for re-run", plural(n, "shard run", "shard runs"), job, fire.UTC().Format(time.RFC3339)), nil
}
