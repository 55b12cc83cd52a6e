// Package relayutil holds what the polling relay (package outbox) and the
// streaming relay (package outbox/pgstream) share without either one's
// types: option defaults, the default logger, how errors and headers are
// stored in coord_outbox.
package relayutil

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
)

// Duration is one of a relay's duration options: its name, where it is,
// and its default.
type Duration struct {
	Name string
	D    *time.Duration
	Def  time.Duration
}

// D is the option called name, at d, defaulting to def.
func D(name string, d *time.Duration, def time.Duration) Duration {
	return Duration{Name: name, D: d, Def: def}
}

// Durations refuses negative durations (an error matching invalid) and
// gives zero ones their defaults.
func Durations(invalid error, ds ...Duration) error {
	for _, d := range ds {
		if *d.D < 0 {
			return errs.Errorf("%w: negative %s %v", invalid, d.Name, *d.D)
		}
		if *d.D == 0 {
			*d.D = d.Def
		}
	}
	return nil
}

// Logger is l, or one writing warnings to stderr.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return l
}

// StoredError is a publish error as last_error keeps it: URL userinfo
// removed, valid UTF-8, at most 2000 bytes.
func StoredError(err error) string { return redact.Stored(err, 2000) }

// ParseHeaders reads a row's headers column (JSON; "" and {} are none).
func ParseHeaders(text string) (map[string]string, error) {
	if text == "" || text == "{}" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(text), &h); err != nil {
		return nil, err
	}
	return h, nil
}

// GroupName is what a relay group may be called: lowercase letters,
// digits and _, at most 32 (it is part of a replication slot's name).
var GroupName = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// Topics checks a relay's topic filter (an error matching invalid) and
// returns it sorted, without duplicates.
func Topics(invalid error, topics []string) ([]string, error) {
	if len(topics) > 64 {
		return nil, errs.Errorf("%w: %d topics: at most 64", invalid, len(topics))
	}
	out := make([]string, 0, len(topics))
	for _, t := range topics {
		if t == "" || len(t) > 255 || !utf8.ValidString(t) || strings.ContainsRune(t, 0) {
			return nil, errs.Errorf("%w: topic %q: 1-255 bytes of UTF-8 without NUL", invalid, redact.Text(t))
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
