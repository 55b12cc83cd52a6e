// Package saga is a coordinator for distributed transactions whose whole
// state lives in the application's own database: sagas (ordered steps, each
// with an action and a compensation run in reverse order when a step fails)
// and TCC (Try every branch, then Confirm all or Cancel all).
//
// A global transaction is recorded by Begin in the caller's business
// transaction, so it exists exactly when that transaction commits — the
// outbox's idea applied to orchestration. Any number of drivers (Run, or
// `sqlcoord saga run`) claim due transactions with FOR UPDATE SKIP LOCKED
// and drive every branch to an end: forward steps retried with backoff until
// the transaction's Timeout, then compensation; Confirm, Cancel and
// Compensate retried until they succeed; a transaction whose ending step
// fails for good (or StuckAfter times) is marked stuck for a person (Retry,
// Resolve, the console, `sqlcoord saga retry|resolve`).
//
// What is guaranteed, and by what:
//
//   - Every change a driver makes to a transaction is fenced by its claim
//     (UPDATE … WHERE gid = ? AND claim = <token>): a driver frozen past its
//     lease and taken over changes nothing in the coordinator's tables.
//   - Branch calls are at least once: a driver can die after a call
//     succeeded and before recording it, and a frozen driver's late call can
//     reach a participant after another driver went on. Participants make
//     them exactly-once with txn.Barrier (Handler and BarrierFunc do it for
//     you): a repeat is skipped, a Cancel/Compensate that arrives before its
//     Try/Action is an empty rollback, and a Try/Action that arrives after it
//     is refused. Without the barrier a saga is not safe.
//   - Timeouts are measured from the database clock at each claim; they
//     decide between going on and compensating, never safety.
//
// Not covered: isolation between concurrent sagas (a saga's intermediate
// effects are visible to others — design compensations for that, or use
// TCC's reserved amounts), participants that are not idempotent, and
// compensations that cannot succeed (they end stuck, for a person).
package saga

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"github.com/sqlcoord/sqlcoord/internal/valid"
	"github.com/sqlcoord/sqlcoord/txn"
	"go.opentelemetry.io/otel/attribute"
)

// Mode is the kind of global transaction.
type Mode string

const (
	// ModeSaga runs each branch's action in order; when one fails for good
	// (a business failure, or the Timeout), the branches run so far are
	// compensated in reverse order.
	ModeSaga Mode = "saga"
	// ModeTCC runs every branch's Try in order, then Confirm on every
	// branch; when a Try fails for good, Cancel on every branch tried, in
	// reverse order.
	ModeTCC Mode = "tcc"
)

// Status is a global transaction's state.
type Status string

const (
	Running      Status = "running"      // forward: actions or tries
	Confirming   Status = "confirming"   // TCC: every Try succeeded, confirming
	Compensating Status = "compensating" // compensating (saga) or cancelling (TCC)
	Succeeded    Status = "succeeded"    // every action ran, or every branch confirmed
	Aborted      Status = "aborted"      // every branch run so far was compensated or cancelled
	Resolved     Status = "resolved"     // a person ended a stuck transaction
)

// Ended reports whether no driver will touch the transaction again.
func (s Status) Ended() bool { return s == Succeeded || s == Aborted || s == Resolved }

// Typed errors; match them with errors.Is.
var (
	// ErrInvalid: an invalid gid, branch, target, payload or option.
	ErrInvalid = errors.New("saga: invalid")
	// ErrNotFound: no global transaction has that gid.
	ErrNotFound = errors.New("saga: no such global transaction")
	// ErrNotStuck: Retry or Resolve named a transaction that is not stuck.
	ErrNotStuck = errors.New("saga: the global transaction is not stuck")
	// ErrBusiness marks a branch's business failure (see Fail).
	ErrBusiness = errors.New("saga: business failure")
	// ErrUnknownTarget: a branch names a function no Register call gave
	// this driver (retried: another driver may know it).
	ErrUnknownTarget = errors.New("saga: no function registered under this name")
	// errLost: the driver's claim was taken over (internal).
	errLost = errors.New("saga: claim lost to another driver")
)

// Fail marks err as a business failure: the branch refused for a reason
// that retrying will not change (insufficient funds, out of stock). A
// forward step's business failure starts compensation; a Confirm's,
// Cancel's or Compensate's makes the transaction stuck. Every other error
// is retried.
func Fail(err error) error {
	if err == nil {
		err = errors.New("refused")
	}
	return &businessError{err}
}

type businessError struct{ err error }

func (e *businessError) Error() string        { return "business failure: " + e.err.Error() }
func (e *businessError) Unwrap() []error      { return []error{ErrBusiness, e.err} }
func (e *businessError) Is(target error) bool { return target == ErrBusiness }

// Branch is one participant of a global transaction.
type Branch struct {
	// Name is the branch id, unique within the transaction (1–128 bytes
	// of UTF-8): the participant's barrier key with the gid.
	Name string
	// Target is either a function registered with Register on the
	// drivers, or an http:// or https:// URL that receives every operation
	// of the branch as a POST (see Handler). A URL with credentials
	// (user:password@, or a query parameter such as token= or password=)
	// is refused: give the drivers an Options.HTTPClient that adds them,
	// so that they never reach a table, a log or the console.
	Target string
	// Payload is passed to every operation of the branch (at most 1 MiB).
	Payload []byte
}

// Global describes a global transaction for Begin.
type Global struct {
	// GID identifies the transaction (1–128 bytes of UTF-8); "" makes a
	// UUIDv7. Beginning a gid twice fails with sqlcoord.ErrDuplicate, so a
	// retried request cannot start a second transaction.
	GID  string
	Mode Mode
	// Branches, in order (1–100).
	Branches []Branch
	// Timeout bounds the forward phase (actions or tries), from Begin, by
	// the database clock: past it, the transaction compensates. Default 1
	// minute. Confirm, Cancel and Compensate have no timeout: they are
	// retried until they succeed or the transaction is stuck.
	Timeout time.Duration
}

// Limits on what Begin accepts.
const (
	MaxBranches   = 100
	MaxPayload    = 1 << 20
	maxTargetSize = 2048
)

// DefaultTimeout is Global.Timeout's default.
const DefaultTimeout = time.Minute

// Coordinator begins, drives and administers global transactions on one
// database. It is safe for concurrent use.
type Coordinator[TTx any] struct {
	db    sqlcoord.Driver[TTx]
	opts  Options
	funcs funcs
}

// New returns a Coordinator for the driver (e.g. a *sqlcoord.DB); Begin
// takes the driver's transaction type. It fails with ErrInvalid for
// invalid options.
func New[TTx any](db sqlcoord.Driver[TTx], opts Options) (*Coordinator[TTx], error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Coordinator[TTx]{db: db, opts: o, funcs: funcs{m: map[string]Func{}}}, nil
}

// Begin records the global transaction in tx, the caller's business
// transaction, and returns its gid: drivers start on it when, and only if,
// tx commits. Nothing is called before then.
func (c *Coordinator[TTx]) Begin(ctx context.Context, tx TTx, g Global) (gid string, retErr error) {
	ctx, end := tracing.Start(ctx, c.db, "saga.begin", c.db.Dialect(), attribute.String("sqlcoord.mode", string(g.Mode)))
	defer func() { end(retErr) }()
	gid, err := checkGlobal(&g)
	if err != nil {
		return "", err
	}
	return gid, c.insert(ctx, tx, gid, g, nil)
}

// Started is a global transaction begun by Start and claimed by its
// coordinator: Drive it once the business transaction committed.
type Started[TTx any] struct {
	c *Coordinator[TTx]
	g *claimed
}

// GID is the transaction's gid.
func (s *Started[TTx]) GID() string { return s.g.gid }

// Start is Begin for a caller that drives the transaction itself right
// after the business transaction commits (Started.Drive): the record is
// written already claimed by this coordinator for its Lease, so Drive
// needs no claim of its own and reads nothing but the claim — the
// cheapest way through (a claim's write and two reads fewer than Begin
// then Drive). If Drive is never called (the process died), Run's
// drivers take the transaction over when the Lease ends: use Begin when
// nothing drives it at once.
func (c *Coordinator[TTx]) Start(ctx context.Context, tx TTx, g Global) (_ *Started[TTx], retErr error) {
	ctx, end := tracing.Start(ctx, c.db, "saga.begin", c.db.Dialect(), attribute.String("sqlcoord.mode", string(g.Mode)))
	defer func() { end(retErr) }()
	gid, err := checkGlobal(&g)
	if err != nil {
		return nil, err
	}
	cl := &claimed{gid: gid, mode: g.Mode, status: Running, attempt: 1, token: claimToken(), deadline: time.Now().Add(g.Timeout)}
	for i, b := range g.Branches {
		cl.branches = append(cl.branches, branchRow{idx: i, name: b.Name, target: b.Target, payload: b.Payload, status: "pending"})
	}
	if err := c.insert(ctx, tx, gid, g, cl); err != nil {
		return nil, err
	}
	return &Started[TTx]{c: c, g: cl}, nil
}

// Drive drives the started transaction once its business transaction
// committed, like Coordinator.Drive: ErrNotFound when it did not commit
// (nothing is called then); a transaction another driver has taken over
// (Drive came after the Lease) is left to it and its status returned.
func (s *Started[TTx]) Drive(ctx context.Context) (Status, error) {
	c, g := s.c, s.g
	d := c.db.Dialect()
	var status string
	err := c.db.Executor().QueryRow(ctx, d.Q().Saga.Claimed, g.gid, g.token).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		in, err := c.Get(ctx, g.gid)
		return in.Status, err
	}
	if err != nil {
		return "", errs.Errorf("saga: drive %s: %w", valid.Quote(g.gid), d.Classify(err))
	}
	if Status(status) != g.status {
		return Status(status), nil
	}
	c.drive(ctx, g)
	return g.status, nil
}

// insert writes g (claimed by cl when not nil) in tx.
func (c *Coordinator[TTx]) insert(ctx context.Context, tx TTx, gid string, g Global, cl *claimed) error {
	d := c.db.Dialect()
	x := c.db.TxExecutor(tx)
	var err error
	if cl == nil {
		_, err = x.Exec(ctx, d.Q().Saga.Insert, gid, string(g.Mode), len(g.Branches), g.Timeout.Microseconds())
	} else {
		_, err = x.Exec(ctx, d.Q().Saga.InsertClaimed, gid, string(g.Mode), len(g.Branches), g.Timeout.Microseconds(),
			cl.token, c.opts.Owner, c.opts.Lease.Microseconds())
	}
	if err != nil {
		return errs.Errorf("saga: begin %s: %w", valid.Quote(gid), d.Classify(err))
	}
	var sb strings.Builder
	sb.WriteString(d.Q().Saga.BranchInsert)
	args := make([]any, 0, 5*len(g.Branches))
	for i, b := range g.Branches {
		if i > 0 {
			sb.WriteString(", ")
		}
		n := len(args)
		fmt.Fprintf(&sb, "(%s, %s, %s, %s, %s, %s)", d.Placeholder(n+1), d.Placeholder(n+2), d.Placeholder(n+3),
			d.Placeholder(n+4), d.Placeholder(n+5), d.Q().Saga.Now)
		payload := b.Payload
		if payload == nil {
			payload = []byte{}
		}
		args = append(args, gid, i, b.Name, b.Target, payload)
	}
	if _, err := x.Exec(ctx, sb.String(), args...); err != nil {
		return errs.Errorf("saga: begin %s: branches: %w", valid.Quote(gid), d.Classify(err))
	}
	return nil
}

// checkGlobal validates g, filling its defaults, and returns its gid.
func checkGlobal(g *Global) (string, error) {
	switch g.Mode {
	case ModeSaga, ModeTCC:
	default:
		return "", errs.Errorf("%w: mode %s (want %q or %q)", ErrInvalid, valid.Quote(string(g.Mode)), ModeSaga, ModeTCC)
	}
	gid := g.GID
	if gid == "" {
		u, err := ids.NewUUIDv7()
		if err != nil {
			return "", errs.Errorf("saga: gid: %w", err)
		}
		gid = u.String()
	} else if err := valid.Text("gid", gid, 128); err != nil {
		return "", errs.Errorf("%w: %w", ErrInvalid, err)
	}
	if g.Timeout < 0 {
		return "", errs.Errorf("%w: negative timeout %v", ErrInvalid, g.Timeout)
	}
	if g.Timeout == 0 {
		g.Timeout = DefaultTimeout
	}
	if len(g.Branches) == 0 || len(g.Branches) > MaxBranches {
		return "", errs.Errorf("%w: %d branches (want 1 to %d)", ErrInvalid, len(g.Branches), MaxBranches)
	}
	seen := make(map[string]bool, len(g.Branches))
	for i, b := range g.Branches {
		if err := valid.Text("branch name", b.Name, 128); err != nil {
			return "", errs.Errorf("%w: branch %d: %w", ErrInvalid, i, err)
		}
		if seen[b.Name] {
			return "", errs.Errorf("%w: branch name %s used twice", ErrInvalid, valid.Quote(b.Name))
		}
		seen[b.Name] = true
		if err := checkTarget(b.Target); err != nil {
			return "", errs.Errorf("%w: branch %s: %w", ErrInvalid, valid.Quote(b.Name), err)
		}
		if len(b.Payload) > MaxPayload {
			return "", errs.Errorf("%w: branch %s: payload of %d bytes (at most %d)", ErrInvalid, valid.Quote(b.Name), len(b.Payload), MaxPayload)
		}
	}
	return gid, nil
}

// isURL reports whether a target is an HTTP endpoint (else a function).
func isURL(target string) bool {
	return strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://")
}

// checkTarget accepts a function name or an http(s) URL without
// credentials.
func checkTarget(target string) error {
	if err := valid.Text("target", target, maxTargetSize); err != nil {
		return err
	}
	if !isURL(target) {
		if strings.Contains(target, "://") {
			return fmt.Errorf("target %s: only http:// and https:// URLs can be called", valid.Quote(safeTarget(target)))
		}
		if strings.TrimSpace(target) != target {
			return fmt.Errorf("function name %s has leading or trailing spaces", valid.Quote(target))
		}
		return nil
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("target %s is not a valid URL", valid.Quote(safeTarget(target)))
	}
	if u.User != nil {
		return errors.New("target URL carries credentials (user:password@): set them in Options.HTTPClient instead")
	}
	if redact.URL(target) != target {
		return fmt.Errorf("target URL %s carries a secret in its query (token, password, signature…): set it in Options.HTTPClient instead", valid.Quote(redact.URL(target)))
	}
	return nil
}

// safeTarget is a target as errors and logs show it: a URL without
// userinfo or query, a function name as is.
func safeTarget(target string) string {
	i := strings.Index(target, "://")
	if i < 0 {
		return target
	}
	rest := target[i+3:]
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		rest = rest[at+1:]
	}
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		rest = rest[:q]
	}
	return target[:i+3] + rest
}

// Call is one operation on a branch, as a Func or an HTTP participant
// receives it.
type Call struct {
	GID     string
	Branch  string
	Op      txn.Op // OpAction/OpCompensate (saga), OpTry/OpConfirm/OpCancel (TCC)
	Payload []byte
	// Attempt is the driver's claim on the transaction (it grows with
	// every takeover); informational — the barrier, not the attempt, makes
	// a late call harmless.
	Attempt int64
}

// Func is a branch implemented in Go and registered by name. It returns
// nil on success, an error made by Fail for a business failure, and any
// other error to be called again later (with the same Call).
type Func func(ctx context.Context, c Call) error

// Register makes fn the branch function named name on this coordinator's
// drivers. Register every function before Run; a branch naming a function
// this driver lacks is retried (another driver may have it) and its error
// says ErrUnknownTarget.
func (c *Coordinator[TTx]) Register(name string, fn Func) error {
	if err := checkTarget(name); err != nil || isURL(name) {
		if err == nil {
			err = errors.New("a function name cannot be a URL")
		}
		return errs.Errorf("%w: %w", ErrInvalid, err)
	}
	if fn == nil {
		return errs.Errorf("%w: nil function for %s", ErrInvalid, valid.Quote(name))
	}
	c.funcs.put(name, fn)
	return nil
}

// BarrierFunc is fn made exactly-once with the participant's barrier b:
// each operation runs fn in its own transaction of b's database together
// with its barrier row, a repeat is skipped, a compensation before its
// action is an empty rollback and an action after its compensation is
// refused (both return nil to the driver).
func BarrierFunc[TTx any](b *txn.Barrier[TTx], fn func(ctx context.Context, tx TTx, c Call) error) Func {
	return func(ctx context.Context, c Call) error {
		_, err := b.Call(ctx, c.GID, c.Branch, c.Op, func(ctx context.Context, tx TTx) error { return fn(ctx, tx, c) })
		return err
	}
}

// validOp reports whether op belongs to mode.
func validOp(op txn.Op) bool {
	switch op {
	case txn.OpAction, txn.OpCompensate, txn.OpTry, txn.OpConfirm, txn.OpCancel:
		return true
	}
	return false
}

// claimToken is a fresh claim token.
func claimToken() string { return uuid.NewString() }
