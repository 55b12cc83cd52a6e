// Package redact keeps credentials out of everything sqlcoord prints, logs
// or stores: DSNs in every form the drivers accept (URL userinfo,
// password=… query parameters, libpq key=value strings, go-sql-driver
// user:pass@tcp(…)), URLs given for publishers (userinfo and secret-looking
// query parameters), and free text such as driver or HTTP error messages.
package redact

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mask replaces a secret in displayed text.
const Mask = "xxxxx"

// secretParams are query or key=value parameter names whose values are
// secrets (lower case).
var secretParams = map[string]bool{
	"password": true, "passwd": true, "pass": true, "pwd": true,
	"sslpassword": true, "token": true, "access_token": true, "api_key": true,
	"apikey": true, "secret": true, "client_secret": true, "sig": true, "signature": true,
}

// kvPassword matches password-like keys in libpq key=value strings, with a
// quoted ('…' with \' escapes) or bare value.
var kvPassword = regexp.MustCompile(`(?i)\b(password|sslpassword)\s*=\s*('(?:\\.|[^'\\])*'|\S+)`)

// userinfo matches scheme://userinfo@ in any text.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s?#]*@`)

// DSN returns dsn with every password replaced by Mask. Unknown shapes are
// scrubbed of anything that looks like a credential rather than shown as
// they are.
func DSN(dsn string) string {
	s := strings.TrimSpace(dsn)
	if i := strings.Index(s, "://"); i > 0 && !strings.Contains(s[:i], " ") {
		if strings.Contains(s, "@tcp(") || strings.Contains(s, "@unix(") {
			// mysql://user:pass@tcp(host)/db: not a URL to net/url
			return mysqlForm(s)
		}
		u, err := url.Parse(s)
		if err != nil {
			return Text(userinfo.ReplaceAllString(s, "${1}"+Mask+"@"), dsn)
		}
		return urlString(u, true)
	}
	if strings.Contains(s, "@tcp(") || strings.Contains(s, "@unix(") || strings.Contains(s, "@/") {
		return mysqlForm(s)
	}
	s = credPair.ReplaceAllString(s, "${1}:"+Mask+"@")
	return kvPassword.ReplaceAllString(s, "${1}="+Mask)
}

// credPair matches user:secret@ in a string of unknown shape.
var credPair = regexp.MustCompile(`([^\s:/@]*):[^\s@]+@`)

// mysqlForm masks the password of user:pass@proto(addr)/db?params and any
// secret parameter.
func mysqlForm(s string) string {
	prefix := ""
	if i := strings.Index(s, "://"); i >= 0 {
		prefix, s = s[:i+3], s[i+3:]
	}
	if at := strings.LastIndex(cut(s, "?"), "@"); at >= 0 {
		cred := s[:at]
		if c := strings.Index(cred, ":"); c >= 0 {
			s = cred[:c+1] + Mask + s[at:]
		}
	}
	if q := strings.Index(s, "?"); q >= 0 {
		s = s[:q+1] + maskQuery(s[q+1:])
	}
	return prefix + s
}

func cut(s, sep string) string {
	if i := strings.Index(s, sep); i >= 0 {
		return s[:i]
	}
	return s
}

func maskQuery(raw string) string {
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, _, found := strings.Cut(p, "=")
		if found && secretParams[strings.ToLower(k)] {
			parts[i] = k + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}

func urlString(u *url.URL, keepUser bool) string {
	c := *u
	if c.User != nil {
		if _, has := c.User.Password(); has && keepUser {
			c.User = url.UserPassword(c.User.Username(), Mask)
		} else if !keepUser {
			c.User = nil
		}
	}
	if c.RawQuery != "" {
		c.RawQuery = maskQuery(c.RawQuery)
	}
	s := c.String()
	return strings.Replace(s, url.QueryEscape(Mask), Mask, -1)
}

// URL returns u for logs and stored errors: userinfo removed entirely (a
// token is often the user name) and secret-looking query parameters
// masked. Text that does not parse as a URL is scrubbed with Text.
func URL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" {
		return Text(u)
	}
	return urlString(p, false)
}

// Secrets returns every secret that dsn carries (password in userinfo, in a
// query parameter, in a key=value pair), in raw and escaped forms, plus
// $PGPASSWORD, longest first.
func Secrets(dsn string) []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		out = append(out, p, url.QueryEscape(p), url.PathEscape(p))
	}
	s := strings.TrimSpace(dsn)
	if i := strings.Index(s, "://"); i >= 0 {
		if u, err := url.Parse(s); err == nil {
			if u.User != nil {
				p, _ := u.User.Password()
				add(p)
			}
			for k, vs := range u.Query() {
				if secretParams[strings.ToLower(k)] {
					for _, v := range vs {
						add(v)
					}
				}
			}
		}
		s = s[i+3:]
	}
	if at := strings.LastIndex(cut(s, "?"), "@"); at > 0 {
		if c := strings.Index(s[:at], ":"); c >= 0 {
			p := s[c+1 : at]
			add(p)
			if d, err := url.PathUnescape(p); err == nil {
				add(d)
			}
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(s, -1) {
		v := m[2]
		if strings.HasPrefix(v, "'") && len(v) >= 2 {
			v = strings.ReplaceAll(v[1:len(v)-1], `\'`, `'`)
		}
		add(v)
		add(m[2])
	}
	add(os.Getenv("PGPASSWORD"))
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// Text returns s with userinfo removed from any URL in it and every
// secret of each given DSN replaced by Mask.
func Text(s string, dsns ...string) string {
	s = userinfo.ReplaceAllString(s, "${1}")
	for _, d := range dsns {
		for _, p := range Secrets(d) {
			if len(p) >= 3 || strings.Contains(s, "="+p) || strings.Contains(s, ":"+p+"@") {
				s = strings.ReplaceAll(s, p, Mask)
			}
		}
	}
	s = kvPassword.ReplaceAllString(s, "${1}="+Mask)
	return s
}

// Error is an error shown as Msg, a text with the secrets removed, that
// still matches what Err matches with errors.Is and errors.As.
type Error struct {
	Msg string
	Err error
}

func (e Error) Error() string { return e.Msg }
func (e Error) Unwrap() error { return e.Err }

// Err is err with its text redacted (Text): err itself when that changes
// nothing, else an Error wrapping it.
func Err(err error, dsns ...string) error {
	msg := Text(err.Error(), dsns...)
	if msg == err.Error() {
		return err
	}
	return Error{Msg: msg, Err: err}
}

// Stored is an error message as a last_error column keeps it: credentials
// removed (Text), valid UTF-8 without NUL (PostgreSQL's text refuses it),
// at most max bytes, cut at a rune boundary.
func Stored(err error, max int) string {
	msg := strings.ToValidUTF8(Text(err.Error()), "?")
	msg = strings.ReplaceAll(msg, "\x00", "?")
	if len(msg) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return msg
}

// Body is a response body as an error shows it: `: "…"`, on one line,
// valid UTF-8, control characters replaced, credentials (URL userinfo,
// and the secrets of dsns) removed; "" for an empty body. A body of max
// bytes is taken as cut there: a rune split by the bound is dropped and
// "…" added.
func Body(b []byte, max int, dsns ...string) string {
	cut := len(b) == max
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if cut {
		s = strings.TrimRightFunc(s, func(r rune) bool { return r == utf8.RuneError }) // a rune split by the bound
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return ""
	}
	s = Text(s, dsns...)
	if cut {
		s += "…"
	}
	return fmt.Sprintf(": %q", s)
}
