// Package membership is service discovery on the application's database:
// an instance joins a group with a lease (expiry by the database clock),
// heartbeats, and leaves on close; a killed instance drops out when its TTL
// runs out. Members lists the live members by the database clock; Watch
// reports changes.
//
// Like etcd's concurrency.Session, a Membership's Ctx ends when the
// membership is lost (heartbeats failing past the TTL, or the row gone):
// work that must only run while a member should run under it.
//
// What it does not cover: a member frozen (SIGSTOP, GC) stays listed until
// its TTL runs out by the database clock, and two lists taken at different
// times may differ — use the list as a snapshot, fixed once per decision
// (as sharded jobs fix their shard total per slot).
package membership

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/keepalive"
	"github.com/sqlcoord/sqlcoord/internal/sqlutil"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

var (
	// ErrLost: the membership ended without Leave (heartbeats failed past
	// the TTL, or the row was removed); Ctx's cause.
	ErrLost = errors.New("membership: lost")
	// ErrInvalid: bad options or names.
	ErrInvalid = errors.New("membership: invalid")
)

// Options tune Join.
type Options struct {
	// ID of this member in the group; default a random one.
	ID string
	// Meta is free data other members see (an address, a version).
	Meta []byte
	// TTL: how long after its last heartbeat a member stays listed;
	// default 10s. Heartbeats every TTL/3.
	TTL time.Duration
}

// Member is a live member as the database lists it.
type Member struct {
	ID          string
	Meta        []byte
	JoinedAt    time.Time
	HeartbeatAt time.Time
	ExpiresAt   time.Time
}

// Membership is this instance's place in a group.
type Membership struct {
	db    sqlcoord.Base
	group string
	id    string
	loop  *keepalive.Loop
}

// Join adds this instance to group and keeps it there until Leave or
// until ctx ends.
func Join(ctx context.Context, db sqlcoord.Base, group string, opt Options) (*Membership, error) {
	if err := valid.Text("group", group, 255); err != nil {
		return nil, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	if opt.ID == "" {
		b := make([]byte, 8)
		rand.Read(b)
		opt.ID = hex.EncodeToString(b)
	}
	if err := valid.Text("member id", opt.ID, 255); err != nil {
		return nil, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	if opt.TTL == 0 {
		opt.TTL = 10 * time.Second
	}
	if opt.TTL < 30*time.Millisecond {
		return nil, errs.Errorf("%w: TTL %v (at least 30ms)", ErrInvalid, opt.TTL)
	}
	if opt.Meta == nil {
		opt.Meta = []byte{}
	}
	d := db.Dialect()
	sent := time.Now()
	if _, err := db.Executor().Exec(ctx, d.Q().MemberJoin, group, opt.ID, opt.Meta, opt.TTL.Microseconds()); err != nil {
		return nil, errs.Errorf("membership: join %q: %w", group, d.Classify(err))
	}
	m := &Membership{db: db, group: group, id: opt.ID}
	loop, err := keepalive.Start(ctx, sent, keepalive.Options{
		TTL: opt.TTL,
		Renew: func(ctx context.Context) error {
			n, err := db.Executor().Exec(ctx, d.Q().MemberHeartbeat, opt.TTL.Microseconds(), group, opt.ID)
			if err != nil {
				return d.Classify(err)
			}
			if n == 0 {
				return ErrLost
			}
			return nil
		},
		Lost: func(err error) bool { return errors.Is(err, ErrLost) },
		Expired: func(last error) error {
			return errs.Errorf("%w: no heartbeat succeeded within the TTL (%v)", ErrLost, last)
		},
	})
	if err != nil {
		return nil, err
	}
	m.loop = loop
	return m, nil
}

// ID is this member's id.
func (m *Membership) ID() string { return m.id }

// Valid reports whether this instance is certainly still a member: the
// membership has not ended and the last heartbeat's validity (TTL from its
// send time, minus a margin, on this process's monotonic clock) has not run
// out. It reads the clock itself, so a process resumed after a freeze sees
// false before any timer of the heartbeat loop has run: check it right
// before acting as a member.
func (m *Membership) Valid() bool { return m.loop.Valid() }

// Ctx ends when the membership ends (Leave, ctx of Join, or lost:
// context.Cause tells which).
func (m *Membership) Ctx() context.Context { return m.loop.Context() }

// Leave stops heartbeats and removes the member at once (other members
// see it gone on their next list, not after the TTL).
func (m *Membership) Leave(ctx context.Context) error {
	m.loop.Stop()
	d := m.db.Dialect()
	if _, err := m.db.Executor().Exec(ctx, d.Q().MemberLeave, m.group, m.id); err != nil {
		return errs.Errorf("membership: leave: %w", d.Classify(err))
	}
	return nil
}

// Members lists group's live members (by the database clock), by id.
func Members(ctx context.Context, db sqlcoord.Base, group string) ([]Member, error) {
	if err := valid.Text("group", group, 255); err != nil {
		return nil, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	d := db.Dialect()
	rows, err := db.Executor().Query(ctx, d.Q().MemberList, group)
	if err != nil {
		return nil, errs.Errorf("membership: list: %w", d.Classify(err))
	}
	defer rows.Close()
	var out []Member
	for rows.Next() {
		var m Member
		if err := rows.Scan(&m.ID, &m.Meta, &m.JoinedAt, &m.HeartbeatAt, &m.ExpiresAt); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Watch lists group every interval and sends the list whenever the set of
// member ids changes (the first list is always sent), until ctx ends; the
// channel is then closed. On PostgreSQL it also lists at once when a
// member joins or leaves (LISTEN coord_members, proven by a probe; behind
// a transaction-mode pooler it only polls). Members that expire are seen
// by the next poll. List errors are skipped (the next poll retries).
func Watch(ctx context.Context, db sqlcoord.Base, group string, every time.Duration) (<-chan []Member, error) {
	if every <= 0 {
		return nil, errs.Errorf("%w: watch interval %v", ErrInvalid, every)
	}
	if err := valid.Text("group", group, 255); err != nil {
		return nil, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	ch := make(chan []Member, 1)
	wake := make(chan struct{}, 1)
	if l, ok := db.(sqlcoord.Listener); ok && l.CanListen() == nil {
		go func() {
			for ctx.Err() == nil {
				err := l.Listen(ctx, "coord_members", sqlcoord.ListenOptions{Probe: true}, func() {
					select {
					case wake <- struct{}{}:
					default:
					}
				})
				if err == nil || errors.Is(err, sqlcoord.ErrListenUnsupported) {
					return // ctx ended, or no notifications here: polling only
				}
				t := time.NewTimer(time.Second)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
		}()
	}
	go func() {
		defer close(ch)
		var last []string
		first := true
		for {
			ms, err := Members(ctx, db, group)
			if err == nil {
				ids := make([]string, len(ms))
				for i, m := range ms {
					ids[i] = m.ID
				}
				if first || !slices.Equal(ids, last) {
					first, last = false, ids
					select {
					case ch <- ms:
					case <-ctx.Done():
						return
					}
				}
			}
			t := time.NewTimer(every)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-wake:
				t.Stop()
			case <-t.C:
			}
		}
	}()
	return ch, nil
}

// Cleanup deletes members expired for longer than grace, in batches.
func Cleanup(ctx context.Context, db sqlcoord.Base, grace time.Duration, batch int) (int64, error) {
	return sqlutil.DeleteInBatches(ctx, db, sqlutil.Pace(db.CleanupPace()), db.Dialect().Q().MemberCleanup, grace, batch)
}
