package coord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

// MaxPermits is the largest permit count of a semaphore.
const MaxPermits = 1000

var (
	// ErrSemaphoreFull: every permit is held. It also matches
	// sqlcoord.ErrLocked.
	ErrSemaphoreFull = errors.New("coord: every permit is held")
	// ErrInvalidPermits: a permit count below 1 or over MaxPermits.
	ErrInvalidPermits = errors.New("coord: invalid permit count")
)

// SemaphoreFullError: TryAcquire found every permit held.
type SemaphoreFullError struct {
	Name    string
	Permits int // the semaphore's permit count
	// NextExpiry is how long until the first held permit expires unless
	// renewed (database clock).
	NextExpiry time.Duration
}

func (e *SemaphoreFullError) Error() string {
	return fmt.Sprintf("coord: semaphore %s: all %d permits are held", valid.Quote(e.Name), e.Permits)
}

// Is makes errors.Is(err, ErrSemaphoreFull) and errors.Is(err, sqlcoord.ErrLocked) true.
func (e *SemaphoreFullError) Is(target error) bool {
	return target == ErrSemaphoreFull || target == sqlcoord.ErrLocked
}

// Semaphore is a named counting semaphore: at most Permits holders at
// once, each holding a permit that is a lease of its own — with a fencing
// token, a TTL by the database's clock (a holder that dies or freezes
// loses it), Renew and KeepAlive as for any lease. Permit i is the lease
// "semaphore:<name>#000i" in coord_leases. The permit count is a row of
// coord_semaphores; the count given to Client.Semaphore is recorded by
// the first use and SetPermits changes it for everyone.
type Semaphore[TTx any] struct {
	c       *Client[TTx]
	name    string
	prefix  string
	permits int
}

// Semaphore returns the semaphore name (1–240 bytes of UTF-8 without NUL)
// with permits (1–MaxPermits) as its count unless one is recorded; it
// talks to the database only when used.
func (c *Client[TTx]) Semaphore(name string, permits int) (*Semaphore[TTx], error) {
	if err := validName("semaphore", name); err != nil {
		return nil, err
	}
	if n := len(semaphorePrefix) + len(name) + 5; n > MaxNameLen {
		return nil, errs.Errorf("%w: semaphore name is %d bytes, over %d", ErrInvalidName, len(name), MaxNameLen-len(semaphorePrefix)-5)
	}
	if err := validPermits(permits); err != nil {
		return nil, err
	}
	return &Semaphore[TTx]{c: c, name: name, prefix: semaphorePrefix + name + "#", permits: permits}, nil
}

func validPermits(n int) error {
	if n < 1 || n > MaxPermits {
		return errs.Errorf("%w: %d permits (1 to %d)", ErrInvalidPermits, n, MaxPermits)
	}
	return nil
}

// Name is the semaphore's name.
func (s *Semaphore[TTx]) Name() string { return s.name }

// Permit is a held permit: a lease (fence the work it protects with
// Token) and its slot.
type Permit struct {
	Lease
	Semaphore string
	Slot      int
}

// PermitHolder is a held permit as the database sees it.
type PermitHolder struct {
	Slot       int
	Owner      string
	Token      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
}

func (s *Semaphore[TTx]) slotName(i int) string { return slotName(s.prefix, i) }

// slotName is the lease name of a semaphore's slot i.
func slotName(prefix string, i int) string { return fmt.Sprintf("%s%04d", prefix, i) }

// Permits reads the semaphore's permit count (recording the default when
// none is).
func (s *Semaphore[TTx]) Permits(ctx context.Context) (int, error) {
	var n int
	err := s.c.pool().QueryRow(ctx, s.c.q.SemaphoreGet, s.name).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := s.c.pool().Exec(ctx, s.c.q.SemaphoreInit, s.name, s.permits); err != nil {
			return 0, s.c.wrap("record permits of semaphore", s.name, err)
		}
		err = s.c.pool().QueryRow(ctx, s.c.q.SemaphoreGet, s.name).Scan(&n)
	}
	if err != nil {
		return 0, s.c.wrap("read permits of semaphore", s.name, err)
	}
	return n, nil
}

// Info reads the semaphore's recorded count and holders without writing
// (Permits 0: no count recorded yet — sql.ErrNoRows is not an error here).
func (s *Semaphore[TTx]) Info(ctx context.Context) (SemaphoreInfo, error) {
	info := SemaphoreInfo{Name: s.name}
	err := s.c.pool().QueryRow(ctx, s.c.q.SemaphoreGet, s.name).Scan(&info.Permits)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return info, s.c.wrap("read permits of semaphore", s.name, err)
	}
	hs, _, err := s.holders(ctx)
	if err != nil {
		return info, err
	}
	info.Held = len(hs)
	return info, nil
}

// SetPermits changes the permit count at run time. Raising it frees new
// permits at once; lowering it revokes the held permits above the new
// count in the same call (their holders' next renewal fails, their
// keepers' contexts end, and writes fenced with their tokens are refused
// once a new holder of the slot wrote).
func (s *Semaphore[TTx]) SetPermits(ctx context.Context, n int) (retErr error) {
	ctx, end := tracing.Start(ctx, s.c.drv, "semaphore.set_permits", s.c.d, attribute.String("sqlcoord.name", s.name))
	defer func() { end(retErr) }()
	if err := validPermits(n); err != nil {
		return err
	}
	if _, err := s.c.pool().Exec(ctx, s.c.q.SemaphoreSet, s.name, n); err != nil {
		return s.c.wrap("set permits of semaphore", s.name, err)
	}
	if _, err := s.c.revoking(ctx, s.c.q.SemaphoreRevoke, s.slotName(n), s.slotName(9999), s.prefix); err != nil {
		return s.c.wrap("revoke permits of semaphore", s.name, err)
	}
	// a raised count frees permits: wake the queue's head
	_ = s.c.d.RingQueue(ctx, s.c.pool(), s.queue(), false)
	return nil
}

// Holders lists the held permits by slot.
func (s *Semaphore[TTx]) Holders(ctx context.Context) ([]PermitHolder, error) {
	hs, _, err := s.holders(ctx)
	return hs, err
}

// holders reads the live permits and the time to the first expiry.
func (s *Semaphore[TTx]) holders(ctx context.Context) ([]PermitHolder, time.Duration, error) {
	return readHolders(ctx, s.c.drv, s.name)
}

// readHolders reads semaphore name's live permits through db's pool, and
// the time to the first expiry.
func readHolders(ctx context.Context, db sqlcoord.Base, name string) ([]PermitHolder, time.Duration, error) {
	prefix := semaphorePrefix + name + "#"
	fail := func(err error) ([]PermitHolder, time.Duration, error) {
		return nil, 0, errs.Errorf("coord: read holders of semaphore %s: %w", valid.Quote(name), db.Dialect().Classify(err))
	}
	rows, err := db.Executor().Query(ctx, db.Dialect().Q().SemaphoreHolders, slotName(prefix, 0), slotName(prefix, 9999), prefix)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	var (
		out  []PermitHolder
		next time.Duration = -1
	)
	for rows.Next() {
		var (
			lease string
			h     PermitHolder
			now   time.Time
		)
		if err := rows.Scan(&lease, &h.Owner, &h.Token, &h.AcquiredAt, &h.ExpiresAt, &now); err != nil {
			return fail(err)
		}
		if len(lease) != len(prefix)+4 || lease[:len(prefix)] != prefix {
			continue
		}
		slot, err := strconv.Atoi(lease[len(prefix):])
		if err != nil || slot < 0 {
			continue
		}
		h.Slot = slot
		out = append(out, h)
		if d := h.ExpiresAt.Sub(now); next < 0 || d < next {
			next = d
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return out, max(next, 0), nil
}

// TryAcquire takes a free permit for owner for ttl, or fails at once with
// a *SemaphoreFullError (matching ErrSemaphoreFull). owner "" means a
// fresh NewOwnerID(); an owner that already holds a permit of this
// semaphore gets that one back, extended, with its token (an owner holds
// at most one permit of a semaphore — use one owner id per holder).
func (s *Semaphore[TTx]) TryAcquire(ctx context.Context, owner string, ttl time.Duration) (_ Permit, retErr error) {
	ctx, end := tracing.Start(ctx, s.c.drv, "semaphore.try_acquire", s.c.d, attribute.String("sqlcoord.name", s.name))
	defer func() { end(retErr) }()
	owner, err := leaseOwner("permit TTL", ttl, owner)
	if err != nil {
		return Permit{}, err
	}
	return s.tryAcquire(ctx, owner, ttl)
}

func (s *Semaphore[TTx]) tryAcquire(ctx context.Context, owner string, ttl time.Duration) (Permit, error) {
	n, err := s.Permits(ctx)
	if err != nil {
		return Permit{}, err
	}
	hs, next, err := s.holders(ctx)
	if err != nil {
		return Permit{}, err
	}
	held := make(map[int]bool, len(hs))
	var try []int
	for _, h := range hs {
		held[h.Slot] = true
		if h.Owner == owner && h.Slot < n {
			try = append(try, h.Slot) // ours: take it back
		}
	}
	if len(try) == 0 {
		start := rand.IntN(n) // spread racing acquirers over the free slots
		for i := 0; i < n; i++ {
			if slot := (start + i) % n; !held[slot] {
				try = append(try, slot)
			}
		}
	}
	for _, slot := range try {
		l, err := s.c.acquireRetrying(ctx, s.slotName(slot), owner, ttl, s.queue(), nil)
		if errors.Is(err, ErrLeaseHeld) {
			continue // taken meanwhile
		}
		if err != nil {
			return Permit{}, err
		}
		// the count may have been lowered since it was read: a slot above
		// it is not a permit
		if now, err := s.Permits(ctx); err != nil || slot >= now {
			_ = s.releaseLease(context.WithoutCancel(ctx), l)
			if err != nil {
				return Permit{}, err
			}
			return Permit{}, &SemaphoreFullError{Name: s.name, Permits: now, NextExpiry: next}
		}
		return Permit{Lease: l, Semaphore: s.name, Slot: slot}, nil
	}
	return Permit{}, &SemaphoreFullError{Name: s.name, Permits: n, NextExpiry: next}
}

// Acquire is TryAcquire that waits, until ctx ends, for a permit to be
// released, expire or be added, first come first served: the wait is a
// ticket in the semaphore's queue (a committed row; nothing is held open
// on the server while waiting), and a free permit goes only to the waiter
// at the head of the queue — the database checks it when it grants the
// permit, so a holder that releases and acquires again at once goes
// behind the waiters, and TryAcquire fails while anyone waits. The head
// is woken by a release (PostgreSQL: NOTIFY; MySQL/MariaDB: KILL QUERY of
// its Client's sleeping connection), by SetPermits raising the count, and
// at the first held permit's expiry. When ctx ends first the error is the
// last *SemaphoreFullError joined with ctx's.
func (s *Semaphore[TTx]) Acquire(ctx context.Context, owner string, ttl time.Duration) (_ Permit, retErr error) {
	ctx, end := tracing.Start(ctx, s.c.drv, "semaphore.acquire", s.c.d, attribute.String("sqlcoord.name", s.name))
	defer func() { end(retErr) }()
	owner, err := leaseOwner("permit TTL", ttl, owner)
	if err != nil {
		return Permit{}, err
	}
	p, err := s.tryAcquire(ctx, owner, ttl)
	var full *SemaphoreFullError
	if err == nil || !errors.As(err, &full) {
		return p, err
	}
	w := &wait{kind: waitSemaphore, queue: s.queue(), key: s.name, owner: owner, ttl: ttl, kick: make(chan struct{}, 1)}
	if err := s.c.w.join(ctx, w); err != nil {
		if ctx.Err() != nil {
			return Permit{}, errors.Join(full, context.Cause(ctx))
		}
		return Permit{}, s.c.wrap("acquire permit (queue)", s.name, err)
	}
	for {
		p, err := s.tryAcquire(ctx, owner, ttl)
		if err == nil {
			s.c.w.done(ctx, w, true) // a permit may be left for the next
			return p, nil
		}
		s.c.w.missed(w)
		var last *SemaphoreFullError
		if errors.As(err, &last) {
			full = last
		} else if ctx.Err() == nil {
			s.c.w.done(ctx, w, true)
			return Permit{}, err
		}
		if ctx.Err() == nil {
			select {
			case <-w.kick:
				continue
			case <-ctx.Done():
			}
		}
		s.c.w.done(ctx, w, true)
		return Permit{}, errors.Join(full, context.Cause(ctx))
	}
}

// queue is the semaphore's queue: its permits' leases share it.
func (s *Semaphore[TTx]) queue() string { return semaphorePrefix + s.name }

func (s *Semaphore[TTx]) channel() string { return notifyChannel("coord_semaphore_", s.name) }

// Release hands the permit back (waking the queue's head on PostgreSQL).
// ErrLeaseLost when it was no longer held: released twice, expired or
// revoked.
func (s *Semaphore[TTx]) Release(ctx context.Context, p Permit) (retErr error) {
	ctx, end := tracing.Start(ctx, s.c.drv, "semaphore.release", s.c.d, attribute.String("sqlcoord.name", s.name))
	defer func() { end(retErr) }()
	if p.Semaphore != s.name || p.Name != s.slotName(p.Slot) {
		return errs.Errorf("%w: permit of semaphore %s released through semaphore %s", ErrInvalidName, valid.Quote(p.Semaphore), valid.Quote(s.name))
	}
	return s.releaseLease(ctx, p.Lease)
}

func (s *Semaphore[TTx]) releaseLease(ctx context.Context, l Lease) error {
	released, err := s.c.releaseWaking(ctx, l, s.channel(), s.queue(), false)
	if err != nil {
		return s.c.wrap("release permit of semaphore", s.name, err)
	}
	if !released {
		return errs.Errorf("coord: release permit of semaphore %s: %w", valid.Quote(s.name), ErrLeaseLost)
	}
	return nil
}

// KeepAlive renews the permit in the background, as Client.KeepAlive does
// a lease; when ctx ends it releases the permit (waking the queue).
func (s *Semaphore[TTx]) KeepAlive(ctx context.Context, p Permit, opt KeepAliveOptions) (*Keeper, error) {
	return s.c.keepAlive(ctx, p.Lease, opt, s.releaseLease)
}

// Revoke ends the permit in slot (an operator's action): its holder's
// next renewal fails. ErrLeaseLost when the slot was not held.
func (s *Semaphore[TTx]) Revoke(ctx context.Context, slot int) error {
	if slot < 0 || slot >= MaxPermits {
		return errs.Errorf("%w: slot %d", ErrInvalidPermits, slot)
	}
	n, err := s.c.revoking(ctx, s.c.q.SemaphoreRevoke, s.slotName(slot), s.slotName(slot), s.prefix)
	if err != nil {
		return s.c.wrap("revoke permit of semaphore", s.name, err)
	}
	if n == 0 {
		return errs.Errorf("coord: revoke permit %d of semaphore %s: %w", slot, valid.Quote(s.name), ErrLeaseLost)
	}
	_ = s.c.d.RingQueue(ctx, s.c.pool(), s.queue(), false) // the slot is free
	return nil
}

// SemaphoreInfo is a semaphore as Semaphores lists it.
type SemaphoreInfo struct {
	Name      string
	Permits   int
	Held      int
	UpdatedAt time.Time // when the count was last set
}

// Semaphores lists up to limit semaphores by name with their permit count
// and how many are held, for operators; limit ≤ 0 means 100.
func (c *Leases) Semaphores(ctx context.Context, limit int) ([]SemaphoreInfo, error) {
	return ListSemaphores(ctx, c.drv, limit)
}

// ListSemaphores is Client.Semaphores for any driver (the console's).
func ListSemaphores(ctx context.Context, db sqlcoord.Base, limit int) ([]SemaphoreInfo, error) {
	if limit <= 0 {
		limit = 100
	}
	fail := func(err error) ([]SemaphoreInfo, error) {
		return nil, errs.Errorf("coord: list semaphores: %w", db.Dialect().Classify(err))
	}
	rows, err := db.Executor().Query(ctx, db.Dialect().Q().SemaphoreList, limit)
	if err != nil {
		return fail(err)
	}
	var out []SemaphoreInfo
	for rows.Next() {
		var s SemaphoreInfo
		if err := rows.Scan(&s.Name, &s.Permits, &s.UpdatedAt); err != nil {
			rows.Close()
			return fail(err)
		}
		out = append(out, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	for i := range out {
		hs, _, err := readHolders(ctx, db, out[i].Name)
		if err != nil {
			return nil, err
		}
		out[i].Held = len(hs)
	}
	return out, nil
}
