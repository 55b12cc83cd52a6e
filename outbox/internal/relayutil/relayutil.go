// Package relayutil holds what the polling relay (package outbox) and the
// streaming relay (package outbox/pgstream) share without either one's
// types: option defaults, the default logger, how errors and headers are
// stored in coord_outbox.
package relayutil

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sqlcoord/sqlcoord/dialects"
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

// Steps are the polling relay's steps that the streaming relay takes too,
// so that both publish, retry and dead-letter one way; M is
// outbox.Message.
type Steps[M any] interface {
	// Publish hands m to the relay's publisher in m's trace, linked to
	// the batch span in bctx.
	Publish(ctx, bctx context.Context, m M) error
	// IsLast: the failed publish perr of m ends it (permanent, or its
	// last attempt).
	IsLast(m M, perr error) bool
	// DeadLetter records in tx that m will not be published.
	DeadLetter(ctx context.Context, tx dialects.Executor, m M, perr error) error
	// RetryDelay is the wait after failed attempt n.
	RetryDelay(n int) time.Duration
	// BatchSize is the relay's batch size.
	BatchSize() int
	// GuardFrozen bounds how long tx outlives a frozen relay: call beat
	// before publishing and its stop after.
	GuardFrozen(ctx context.Context, tx dialects.OwnedTx, timeout time.Duration, inClaim bool) (beat func() (stop func()), err error)
}

// StepsOf returns the Steps of a polling relay (an *outbox.Relay); package
// outbox sets it.
var StepsOf func(relay any) any
