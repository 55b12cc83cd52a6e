package coord

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"github.com/sqlcoord/sqlcoord/internal/valid"
	"github.com/sqlcoord/sqlcoord/metrics"
)

// Errors of elections and semaphores.
var (
	// ErrNoLeader: the election has no live leader now.
	ErrNoLeader = errors.New("coord: no leader")
	// ErrNotLeader: Proclaim or Resign by a leadership that has ended
	// (resigned, expired, taken over). It also matches ErrLeaseLost.
	ErrNotLeader = errors.New("coord: not the leader")
	// ErrInvalidValue: a proclaimed value that is not UTF-8, holds NUL or
	// is over MaxValueLen bytes.
	ErrInvalidValue = errors.New("coord: invalid value")
)

// notLeaderError matches ErrNotLeader and ErrLeaseLost.
type notLeaderError struct{ op, name string }

func (e *notLeaderError) Error() string {
	return "coord: " + e.op + " election " + valid.Quote(e.name) + ": not the leader (the term ended)"
}
func (e *notLeaderError) Is(target error) bool {
	return target == ErrNotLeader || target == ErrLeaseLost
}

// MaxValueLen is the longest value a leader proclaims, in bytes.
const MaxValueLen = 16 << 10

// keepTerms is how many of an election's newest terms stay recorded for
// observers; a new leader prunes older ones.
const keepTerms = 1000

// electionPrefix and semaphorePrefix start the lease names elections and
// semaphores use in coord_leases: leases named so are theirs.
const (
	electionPrefix  = "election:"
	semaphorePrefix = "semaphore:"
)

// DefaultElectionTTL is an election's leadership TTL when the options give
// none.
const DefaultElectionTTL = 10 * time.Second

// ElectionOptions tune an Election.
type ElectionOptions struct {
	// ID names this candidate (its leadership lease's owner); default a
	// fresh NewOwnerID(). Two candidates must not share one.
	ID string
	// TTL of the leadership: a leader that dies or freezes is replaced
	// once it has passed (by the database's clock), and one that cannot
	// renew stops leading before it has. Default DefaultElectionTTL.
	TTL time.Duration
	// KeepAlive tunes the leader's renewals (Interval default TTL/3,
	// Margin TTL/10).
	KeepAlive KeepAliveOptions
	// PollInterval is unused: observers are woken (see Observe), and
	// where they cannot be their Client polls at ClientOptions.
	// PollInterval. Negative is still refused.
	PollInterval time.Duration
}

// Election is one named election: candidates Campaign, the winner leads
// for a term until it resigns, its context ends or it stops renewing, and
// anyone reads or observes the leader. The leadership is a lease (named
// "election:" + name in coord_leases) and the term is its fencing token:
// strictly larger for every new leader, also across failovers and
// restores, so a deposed leader's writes fenced with its term (Fence,
// Update) are refused by the rows they would change.
type Election[TTx any] struct {
	c     *Client[TTx]
	name  string
	lease string
	opt   ElectionOptions
}

// Election returns the election name (1–246 bytes of UTF-8 without NUL)
// with these options; it talks to the database only when used.
func (c *Client[TTx]) Election(name string, opt ElectionOptions) (*Election[TTx], error) {
	if err := validName("election", name); err != nil {
		return nil, err
	}
	if len(electionPrefix)+len(name) > MaxNameLen {
		return nil, errs.Errorf("%w: election name is %d bytes, over %d", ErrInvalidName, len(name), MaxNameLen-len(electionPrefix))
	}
	if opt.ID == "" {
		opt.ID = NewOwnerID()
	} else if err := validName("candidate id", opt.ID); err != nil {
		return nil, err
	}
	if opt.TTL == 0 {
		opt.TTL = DefaultElectionTTL
	}
	if err := validDuration("election TTL", opt.TTL, MinTTL); err != nil {
		return nil, err
	}
	if opt.PollInterval < 0 {
		return nil, errs.Errorf("%w: negative poll interval %v", ErrInvalidTTL, opt.PollInterval)
	}
	if opt.PollInterval == 0 {
		opt.PollInterval = 50 * time.Millisecond
	}
	if opt.KeepAlive.Interval < 0 || opt.KeepAlive.Margin < 0 || opt.KeepAlive.MaxHold < 0 {
		return nil, errs.Errorf("%w: negative keep-alive interval, margin or max hold", ErrInvalidTTL)
	}
	return &Election[TTx]{c: c, name: name, lease: electionPrefix + name, opt: opt}, nil
}

// Name is the election's name; ID this candidate's id.
func (e *Election[TTx]) Name() string { return e.name }

// ID is this candidate's id (the leadership lease's owner).
func (e *Election[TTx]) ID() string { return e.opt.ID }

// Leader is an election's leader as the database recorded it.
type Leader struct {
	Election string
	ID       string // the leader's candidate id
	Term     int64  // the leadership's fencing token
	Value    string // what the leader proclaimed
	Since    time.Time
	// ExpiresAt is when the leadership ends unless renewed (database
	// clock); zero in what Observe sends for a term that has ended.
	ExpiresAt time.Time
	// Live: the term is current (Leader: always; Observe: false for a term
	// already over when read, or once it ended without a successor).
	Live bool

	expiresIn time.Duration // ExpiresAt - the database's now, when read
}

// Leadership is a won election. Its Context ends when leadership is lost
// (cause ErrLeaseLost: renewal refused or failing until the term may have
// ended), resigned, or the context given to Campaign ends (then it
// resigns). Fence the leader's writes with Term: cancellation is prompt
// but advisory, the fence is the guarantee.
type Leadership struct {
	leader Leader
	keeper *Keeper
	term   func(ctx context.Context, value string) error
	resign func(ctx context.Context) error
}

// Term is the leadership's term: its fencing token.
func (l *Leadership) Term() int64 { return l.leader.Term }

// Leader is the leadership as won (its value as proclaimed at Campaign).
func (l *Leadership) Leader() Leader { return l.leader }

// Context ends when the leadership does.
func (l *Leadership) Context() context.Context { return l.keeper.Context() }

// Valid reports whether the leadership certainly still holds now, by the
// local clock (see Keeper.Valid).
func (l *Leadership) Valid() bool { return l.keeper.Valid() }

// Lease is the leadership's lease with its latest expiry.
func (l *Leadership) Lease() Lease { return l.keeper.Lease() }

// Done is closed when the leadership has ended and, if it ended with the
// context given to Campaign, after it was resigned.
func (l *Leadership) Done() <-chan struct{} { return l.keeper.Done() }

// Proclaim changes the value followers read for this term. It is refused
// with ErrNotLeader once the term has ended (checked by the database in
// the same statement).
func (l *Leadership) Proclaim(ctx context.Context, value string) error {
	if err := validValue(value); err != nil {
		return err
	}
	return l.term(ctx, value)
}

// Resign ends the leadership now, so another candidate is elected at once
// (with a larger term). ErrNotLeader when the term had already ended.
func (l *Leadership) Resign(ctx context.Context) error {
	l.keeper.Stop()
	<-l.keeper.Done()
	return l.resign(ctx)
}

func validValue(v string) error {
	if len(v) == 0 {
		return nil
	}
	if err := valid.Text("value", v, MaxValueLen); err != nil {
		return errs.Errorf("%w: %w", ErrInvalidValue, err)
	}
	return nil
}

// Campaign waits until this candidate is elected or ctx ends, then
// proclaims value and keeps the leadership alive until ctx ends (it then
// resigns), Resign, or loss. Candidates queue in the database (as
// AcquireWait's waiters do): when a leader resigns or its term runs out
// the first in line is elected, within the TTL of a leader's death plus
// the queue head's check. When ctx ends first the error matches
// ErrLeaseHeld and ctx's error.
//
// One Election value campaigns once at a time: its id is the lease's owner,
// and a second concurrent Campaign with the same id would share the term.
func (e *Election[TTx]) Campaign(ctx context.Context, value string) (_ *Leadership, retErr error) {
	ctx, end := tracing.Start(ctx, e.c.drv, "election.campaign", e.c.d, attribute.String("sqlcoord.name", e.name))
	defer func() { end(retErr) }()
	if err := validValue(value); err != nil {
		return nil, err
	}
	for {
		l, err := e.c.AcquireWait(ctx, e.lease, e.opt.ID, e.opt.TTL)
		if err != nil {
			return nil, err
		}
		ok, err := e.writeTerm(ctx, l, value)
		if err != nil {
			_ = e.release(context.WithoutCancel(ctx), l) // the next candidate need not wait out the TTL
			return nil, err
		}
		if !ok {
			continue // the term ended before it was recorded: campaign again
		}
		if l.Token > keepTerms {
			// best effort: the next leader prunes what this one leaves
			_, _ = e.c.pool().Exec(ctx, e.c.q.ElectionPrune, e.name, l.Token-keepTerms)
		}
		k, err := e.c.keepAlive(ctx, l, e.opt.KeepAlive, e.release)
		if err != nil {
			_ = e.release(context.WithoutCancel(ctx), l)
			return nil, err
		}
		ld := &Leadership{keeper: k,
			leader: Leader{Election: e.name, ID: l.Owner, Term: l.Token, Value: value, ExpiresAt: l.ExpiresAt, Live: true},
			term: func(ctx context.Context, value string) error {
				ok, err := e.writeTerm(ctx, k.Lease(), value)
				if err == nil && !ok {
					err = &notLeaderError{"proclaim in", e.name}
				}
				return err
			},
			resign: func(ctx context.Context) error { return e.release(ctx, k.Lease()) },
		}
		if st, err := e.Leader(ctx); err == nil && st.Term == l.Token {
			ld.leader.Since = st.Since
		}
		rec := metrics.Of(e.c.drv)
		rec.Leadership(e.name, l.Token, true)
		go func() { <-k.Done(); rec.Leadership(e.name, l.Token, false) }()
		return ld, nil
	}
}

// writeTerm records the term (or a new value for it) while its lease is
// live; false when it is not.
func (e *Election[TTx]) writeTerm(ctx context.Context, l Lease, value string) (bool, error) {
	n, err := e.c.pool().Exec(ctx, e.c.q.ElectionTerm, e.name, value, e.lease, l.Owner, l.Token)
	if err != nil {
		return false, e.c.wrap("record term of election", e.name, err)
	}
	if n > 0 {
		// observers see the term now, not at their next read
		_ = e.c.d.TermWritten(ctx, e.c.pool(), e.lease)
	}
	return n > 0, nil
}

// release ends the term and wakes the next candidate and the observers.
func (e *Election[TTx]) release(ctx context.Context, l Lease) error {
	released, err := e.c.releaseWaking(ctx, l, notifyChannel("coord_election_", e.name), e.lease, true)
	if err != nil {
		return e.c.wrap("resign from election", e.name, err)
	}
	if !released {
		return &notLeaderError{"resign from", e.name}
	}
	return nil
}

// Leader reads the election's current leader; ErrNoLeader when there is
// none (never elected, resigned, or its term ran out).
func (e *Election[TTx]) Leader(ctx context.Context) (Leader, error) {
	return readLeader(ctx, e.c.drv, e.name)
}

// readLeader reads election name's current leader through db's pool.
func readLeader(ctx context.Context, db sqlcoord.Base, name string) (Leader, error) {
	var (
		ld        = Leader{Election: name}
		now       time.Time
		value     sql.NullString
		updatedAt sql.NullTime
	)
	err := db.Executor().QueryRow(ctx, db.Dialect().Q().ElectionLeader, name, electionPrefix+name).Scan(&ld.ID, &ld.Term, &ld.Since, &ld.ExpiresAt, &now, &value, &updatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Leader{Election: name}, errs.Errorf("coord: election %s: %w", valid.Quote(name), ErrNoLeader)
	}
	if err != nil {
		return Leader{Election: name}, errs.Errorf("coord: read leader of election %s: %w", valid.Quote(name), db.Dialect().Classify(err))
	}
	if !ld.ExpiresAt.After(now) {
		return Leader{Election: name, Term: ld.Term}, errs.Errorf("coord: election %s: %w (term %d ended)", valid.Quote(name), ErrNoLeader, ld.Term)
	}
	ld.Value, ld.Live = value.String, true
	ld.expiresIn = ld.ExpiresAt.Sub(now)
	return ld, nil
}

// Observe sends the election's leaders in term order, starting with the
// current one (or the newest recorded term) when called, until ctx ends;
// then it closes the channel. Its error is the first read's. Every term
// recorded after that is sent, each once (Live false when it was already
// over when read), again when its leader proclaims a new value, and once
// more with Live false when it ends without a successor. An observer is a
// row of coord_observers of its Client's waiter: a new term, a value or a
// resignation wakes it (PostgreSQL: NOTIFY; MySQL/MariaDB: KILL QUERY of
// the Client's sleeping connection), and its Client reads the elections it
// observes when a term may have run out. Observing holds nothing open on
// the server, and a Client observing many elections reads them with one
// statement. Where no wake-up can reach the Client (a transaction-mode
// pooler without ClientOptions.Listener) it reads every
// ClientOptions.PollInterval. An observer that falls more than 1,000 terms
// and an hour behind misses the pruned ones. Read errors are retried with
// backoff; the channel is not buffered.
func (e *Election[TTx]) Observe(ctx context.Context) (<-chan Leader, error) {
	first, err := e.Leader(ctx)
	if err != nil && !errors.Is(err, ErrNoLeader) {
		return nil, err
	}
	start := max(first.Term, 1) // the current (or newest ended) term
	out := make(chan Leader)
	o := &observation{queue: e.lease, ttl: e.opt.TTL, kick: make(chan struct{}, 1)}
	e.c.w.observe(o)
	go func() {
		defer close(out)
		defer e.c.w.unobserve(o)
		var (
			last    Leader // the newest sent
			sent    bool
			failure int
		)
		send := func(l Leader) bool {
			select {
			case out <- l:
				last, sent = l, true
				return true
			case <-ctx.Done():
				return false
			}
		}
		for ctx.Err() == nil {
			_, err := e.observeOnce(ctx, &last, sent, start, send)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				failure++
				if backoff.Sleep(ctx, backoff.Policy{Base: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Full}.Delay(failure)) != nil {
					return
				}
				continue
			}
			failure = 0
			select {
			case <-ctx.Done():
			case <-o.kick:
			}
		}
	}()
	return out, nil
}

// observeOnce sends what changed since last and says how long to wait.
func (e *Election[TTx]) observeOnce(ctx context.Context, last *Leader, sent bool, start int64, send func(Leader) bool) (time.Duration, error) {
	from := last.Term
	if !sent {
		from = start
	}
	rows, err := e.c.pool().Query(ctx, e.c.q.ElectionTerms, e.name, from, 100)
	if err != nil {
		return 0, e.c.wrap("observe election", e.name, err)
	}
	var terms []Leader
	for rows.Next() {
		l := Leader{Election: e.name}
		var updated time.Time
		if err := rows.Scan(&l.Term, &l.ID, &l.Value, &l.Since, &updated); err != nil {
			rows.Close()
			return 0, e.c.wrap("observe election", e.name, err)
		}
		terms = append(terms, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, e.c.wrap("observe election", e.name, err)
	}
	// read after the terms: a term recorded meanwhile is sent next time,
	// never as over before it is seen live
	cur, err := e.Leader(ctx)
	if err != nil && !errors.Is(err, ErrNoLeader) {
		return 0, err
	}
	for _, l := range terms {
		if l.Term == cur.Term && cur.Live {
			l.Live, l.ExpiresAt = true, cur.ExpiresAt
		}
		if sent && l.Term == last.Term && l.Value == last.Value && l.Live == last.Live {
			continue
		}
		if sent && l.Term < last.Term {
			continue
		}
		if !send(l) {
			return 0, ctx.Err()
		}
	}
	if len(terms) == 100 {
		return 0, nil // more to read
	}
	if sent && last.Live && !(cur.Live && cur.Term == last.Term) {
		// the term ended without a successor recorded yet
		ended := *last
		ended.Live, ended.ExpiresAt = false, time.Time{}
		if !send(ended) {
			return 0, ctx.Err()
		}
	}
	if cur.Live {
		return cur.expiresIn + time.Millisecond, nil
	}
	return time.Minute, nil
}

// LeaderCallbacks are Run's callbacks, in the style of client-go's
// leaderelection.
type LeaderCallbacks struct {
	// OnStartedLeading runs the leader's work each time this candidate is
	// elected; ctx ends when the leadership does. When it returns, the
	// leadership is resigned.
	OnStartedLeading func(ctx context.Context, l *Leadership)
	// OnStoppedLeading runs after each leadership ended (optional).
	OnStoppedLeading func(term int64)
	// OnNewLeader sees every leader Observe sends (optional), from a
	// goroutine of its own.
	OnNewLeader func(Leader)
}

// permanent: an error campaigning again cannot cure.
func permanent(err error) bool {
	for _, p := range []error{sqlcoord.ErrNoSchema, sqlcoord.ErrAccessDenied, sqlcoord.ErrBadDSN, sqlcoord.ErrDriverSetting,
		ErrInvalidName, ErrInvalidTTL, ErrInvalidValue} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// Run campaigns, leads through cb.OnStartedLeading, and campaigns again
// when leadership ends, until ctx ends (then it resigns and returns ctx's
// cause). Errors a new campaign cannot cure (a missing schema, denied
// access, bad input) end it; others (a lost connection, a failover, a
// server read-only for now) are retried with backoff.
func (e *Election[TTx]) Run(ctx context.Context, value string, cb LeaderCallbacks) error {
	if cb.OnStartedLeading == nil {
		return errs.Errorf("coord: election %s: Run needs OnStartedLeading", valid.Quote(e.name))
	}
	if err := validValue(value); err != nil {
		return err
	}
	if cb.OnNewLeader != nil {
		octx, stop := context.WithCancel(ctx)
		ch, err := e.Observe(octx)
		if err != nil {
			stop()
			return err
		}
		done := make(chan struct{})
		defer func() { stop(); <-done }() // no callback after Run returned
		go func() {
			defer close(done)
			for l := range ch {
				cb.OnNewLeader(l)
			}
		}()
	}
	for attempt := 1; ; attempt++ {
		l, err := e.Campaign(ctx, value)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err != nil {
			if permanent(err) {
				return err
			}
			if err := backoff.Sleep(ctx, backoff.Policy{Base: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: backoff.Full}.Delay(attempt)); err != nil {
				return context.Cause(ctx)
			}
			continue
		}
		attempt = 0
		cb.OnStartedLeading(l.Context(), l)
		_ = l.Resign(context.WithoutCancel(ctx))
		if cb.OnStoppedLeading != nil {
			cb.OnStoppedLeading(l.Term())
		}
	}
}

// Depose ends the current term whoever leads (an operator's action): the
// next candidate in line is elected with a larger term, and the deposed
// leader's renewal and fenced writes fail. It returns the deposed leader;
// ErrNoLeader when there was none.
func (e *Election[TTx]) Depose(ctx context.Context) (Leader, error) {
	l, err := e.Leader(ctx)
	if err != nil {
		return l, err
	}
	if err := e.release(ctx, Lease{Name: e.lease, Owner: l.ID, Token: l.Term}); err != nil {
		if errors.Is(err, ErrNotLeader) {
			return l, errs.Errorf("coord: election %s: %w (term %d ended meanwhile)", valid.Quote(e.name), ErrNoLeader, l.Term)
		}
		return l, err
	}
	return l, nil
}

// Elections lists up to limit elections by name with their newest term
// (Live when it is current), for operators; limit ≤ 0 means 100.
func (c *Leases) Elections(ctx context.Context, limit int) ([]Leader, error) {
	return ListElections(ctx, c.drv, limit)
}

// ListElections is Client.Elections for any driver (the console's).
func ListElections(ctx context.Context, db sqlcoord.Base, limit int) ([]Leader, error) {
	if limit <= 0 {
		limit = 100
	}
	fail := func(err error) ([]Leader, error) {
		return nil, errs.Errorf("coord: list elections: %w", db.Dialect().Classify(err))
	}
	rows, err := db.Executor().Query(ctx, db.Dialect().Q().ElectionList, limit)
	if err != nil {
		return fail(err)
	}
	var out []Leader
	for rows.Next() {
		var l Leader
		if err := rows.Scan(&l.Election, &l.Term, &l.ID, &l.Value, &l.Since); err != nil {
			rows.Close()
			return fail(err)
		}
		out = append(out, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	for i, l := range out {
		if cur, err := readLeader(ctx, db, l.Election); err == nil && cur.Term == l.Term {
			out[i] = cur
		} else if err != nil && !errors.Is(err, ErrNoLeader) {
			return nil, err
		}
	}
	return out, nil
}
