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

// SecretKey reports whether a parameter name carries a secret — or may be
// a misspelling of one that does (pasword, passwrd, pswd, sslpasword):
// what a DSN with such a key means to say is not worth guessing, its value
// is hidden.
func SecretKey(k string) bool {
	k = strings.ToLower(strings.TrimSpace(k))
	if secretParams[k] {
		return true
	}
	for _, frag := range []string{"pass", "pwd", "psw", "pw", "secret", "token", "cred"} {
		if strings.Contains(k, frag) {
			return true
		}
	}
	return distance(k, "password") <= 3 || distance(strings.TrimPrefix(k, "ssl"), "password") <= 3
}

// distance is the Levenshtein distance of a and b (bytes).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// kvPair matches a key=value pair in a libpq connection string or in free
// text: the value quoted ('…' with \' escapes) or bare.
var kvPair = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.\-]*)(\s*=\s*)('(?:\\.|[^'\\])*'|[^\s]*)`)

// libpqKeys are the connection-string keys whose values are shown as they
// are (libpq's and pgx's); any other key's value is hidden, whatever it
// is called.
var libpqKeys = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "connect_timeout": true,
	"client_encoding": true, "options": true, "application_name": true, "fallback_application_name": true,
	"keepalives": true, "keepalives_idle": true, "keepalives_interval": true, "keepalives_count": true,
	"tcp_user_timeout": true, "replication": true, "gssencmode": true, "sslmode": true, "sslcompression": true,
	"sslcert": true, "sslrootcert": true, "sslcrl": true, "sslcrldir": true, "sslsni": true, "requirepeer": true,
	"ssl_min_protocol_version": true, "ssl_max_protocol_version": true, "krbsrvname": true, "gsslib": true,
	"service": true, "target_session_attrs": true, "load_balance_hosts": true, "default_query_exec_mode": true,
	"statement_cache_capacity": true, "description_cache_capacity": true, "search_path": true,
	"pool_max_conns": true, "pool_min_conns": true, "pool_max_conn_lifetime": true, "pool_max_conn_idle_time": true,
	"pool_health_check_period": true,
}

// userinfo matches scheme://userinfo@ in any text.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s?#]*@`)

// DSN returns dsn with every password replaced by Mask: a URL's (read up
// to the last @, so an unescaped @, # or / in the password hides no part
// of it), every query parameter or key=value pair whose name carries a
// secret or may be a misspelling of one, and in a libpq key=value string
// every key it does not know. Unknown shapes are scrubbed of anything that
// looks like a credential rather than shown as they are.
func DSN(dsn string) string {
	s := strings.TrimSpace(dsn)
	if i := strings.Index(s, "://"); i > 0 && !strings.Contains(s[:i], " ") {
		return urlForm(s[:i+3], s[i+3:])
	}
	if strings.Contains(s, "@tcp(") || strings.Contains(s, "@unix(") || strings.Contains(s, "@/") {
		return urlForm("", s)
	}
	s = credPair.ReplaceAllString(s, "${1}:"+Mask+"@")
	return maskPairs(s, true)
}

// credPair matches user:secret@ in a string of unknown shape.
var credPair = regexp.MustCompile(`([^\s:/@]*):[^\s@]+@`)

// urlForm masks a URL-like DSN's password (userinfo up to the last @;
// with no @, nothing is a password) and its secret query parameters.
func urlForm(scheme, rest string) string {
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		cred, after := rest[:at], rest[at:]
		if c := strings.Index(cred, ":"); c >= 0 {
			rest = cred[:c+1] + Mask + after
		}
	}
	if q := strings.Index(rest, "?"); q >= 0 {
		rest = rest[:q+1] + maskQuery(rest[q+1:])
	}
	return scheme + rest
}

// maskPairs hides the values of key=value pairs with a secret-looking key
// (and, with unknownToo, of every key libpq does not know).
func maskPairs(s string, unknownToo bool) string {
	return kvPair.ReplaceAllStringFunc(s, func(m string) string {
		sub := kvPair.FindStringSubmatch(m)
		if SecretKey(sub[1]) || (unknownToo && !libpqKeys[strings.ToLower(sub[1])]) {
			return sub[1] + sub[2] + Mask
		}
		return m
	})
}

func maskQuery(raw string) string {
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, _, found := strings.Cut(p, "=")
		if found && SecretKey(k) {
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

// Secrets returns every secret that dsn carries — the password of its
// userinfo (up to the last @), the values of its secret-looking query
// parameters and key=value pairs, and of a libpq string's keys libpq does
// not know — in raw and escaped forms, with the parts of a password cut
// at @ # / ? (a driver that misreads such a password shows them apart),
// plus $PGPASSWORD; longest first.
func Secrets(dsn string) []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		out = append(out, p, url.QueryEscape(p), url.PathEscape(p))
		if d, err := url.QueryUnescape(p); err == nil && d != p {
			out = append(out, d)
		}
		for _, part := range strings.FieldsFunc(p, func(r rune) bool { return strings.ContainsRune("@#/?:", r) }) {
			if len(part) >= 3 && part != p {
				out = append(out, part)
			}
		}
	}
	s := strings.TrimSpace(dsn)
	urlish := false
	if i := strings.Index(s, "://"); i >= 0 {
		s, urlish = s[i+3:], true
	}
	if urlish || strings.Contains(s, "@tcp(") || strings.Contains(s, "@unix(") || strings.Contains(s, "@/") {
		if at := strings.LastIndex(s, "@"); at > 0 {
			if c := strings.Index(s[:at], ":"); c >= 0 {
				add(s[c+1 : at])
			}
		}
		if q := strings.Index(s, "?"); q >= 0 {
			for _, p := range strings.Split(s[q+1:], "&") {
				if k, v, ok := strings.Cut(p, "="); ok && SecretKey(k) {
					add(v)
				}
			}
		}
	} else {
		if at := strings.LastIndex(s, "@"); at > 0 && !strings.Contains(s[:at], " ") {
			if c := strings.Index(s[:at], ":"); c >= 0 { // user:secret@host
				add(s[c+1 : at])
			}
		}
		for _, m := range kvPair.FindAllStringSubmatch(s, -1) {
			if SecretKey(m[1]) || !libpqKeys[strings.ToLower(m[1])] {
				v := m[3]
				if strings.HasPrefix(v, "'") && len(v) >= 2 {
					v = strings.ReplaceAll(v[1:len(v)-1], `\'`, `'`)
				}
				add(v)
				add(m[3])
			}
		}
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
	return maskPairs(s, false)
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
