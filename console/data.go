package console

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/saga"
)

// each runs a console query with the row limit and calls scan per row.
func (c *Console) each(ctx context.Context, q string, scan func(dialects.Rows) error, args ...any) error {
	rows, err := c.db.Executor().Query(ctx, q, args...)
	if err != nil {
		return c.db.Dialect().Classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Lease is a row of the leases page.
type Lease struct {
	Name, Owner                      string
	Token                            int64
	ExpiresAt, AcquiredAt, RenewedAt time.Time
	Left                             float64 // seconds; negative: expired
}

func (c *Console) leaseRows(ctx context.Context) ([]Lease, error) {
	var out []Lease
	err := c.each(ctx, c.db.Dialect().Q().Console.Leases, func(r dialects.Rows) error {
		var l Lease
		if err := r.Scan(&l.Name, &l.Owner, &l.Token, &l.ExpiresAt, &l.AcquiredAt, &l.RenewedAt, &l.Left); err != nil {
			return err
		}
		out = append(out, l)
		return nil
	}, c.opt.Limit)
	return out, err
}

func (c *Console) leases(ctx context.Context, _ *http.Request, now time.Time) (string, any, error) {
	ls, err := c.leaseRows(ctx)
	return "Leases", ls, err
}

// HeldLock is a lock name held by an open transaction.
type HeldLock struct {
	Name        string
	Holder      int64
	App, Client string
	Age         float64
	State       string
}

// LockTxn is a transaction holding row locks (MySQL family).
type LockTxn struct {
	Holder     int64
	User, Host string
	Age        float64
	Rows       int64
	State      string
}

// LockWait is a session waiting for a lock.
type LockWait struct {
	Waiter    int64
	App       string
	Blockers  string
	Waited    float64
	Statement string
}

type locksData struct {
	Held       []HeldLock
	Txns       []LockTxn
	Waits      []LockWait
	Postgres   bool
	Unreadable string
}

func (c *Console) lockData(ctx context.Context) (locksData, error) {
	q := c.db.Dialect().Q().Console
	d := locksData{Postgres: c.db.Dialect().Family() == "postgres"}
	err := c.each(ctx, q.LocksHeld, func(r dialects.Rows) error {
		var h HeldLock
		if err := r.Scan(&h.Name, &h.Holder, &h.App, &h.Client, &h.Age, &h.State); err != nil {
			return err
		}
		h.Name = lockDataName(h.Name)
		d.Held = append(d.Held, h)
		return nil
	}, c.opt.Limit)
	if err == nil && q.LockTxns != "" {
		err = c.each(ctx, q.LockTxns, func(r dialects.Rows) error {
			var t LockTxn
			if err := r.Scan(&t.Holder, &t.User, &t.Host, &t.Age, &t.Rows, &t.State); err != nil {
				return err
			}
			d.Txns = append(d.Txns, t)
			return nil
		}, c.opt.Limit)
	}
	if err == nil {
		err = c.each(ctx, q.LockWaits, func(r dialects.Rows) error {
			var w LockWait
			if err := r.Scan(&w.Waiter, &w.App, &w.Blockers, &w.Waited, &w.Statement); err != nil {
				return err
			}
			w.Statement = redact.Text(w.Statement)
			d.Waits = append(d.Waits, w)
			return nil
		}, c.opt.Limit)
	}
	if err != nil {
		// Most often a missing privilege (PROCESS on MariaDB); the
		// other pages still work.
		d.Unreadable = redact.Text(err.Error())
	}
	return d, nil
}

func (c *Console) locks(ctx context.Context, _ *http.Request, now time.Time) (string, any, error) {
	d, err := c.lockData(ctx)
	return "Locks", d, err
}

// JobSummary is a row of the jobs page.
type JobSummary struct {
	jobs.Definition
	Runs, Running, Succeeded, Failed, Missing int
	Retrying, Dead, Queued                    int
	Last                                      *jobs.Record
}

func (c *Console) jobSummaries(ctx context.Context, now time.Time) ([]JobSummary, error) {
	r := jobs.NewRuns(c.db)
	defs, err := r.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]JobSummary, 0, len(defs))
	for _, def := range defs {
		s := JobSummary{Definition: def}
		recs, err := r.List(ctx, def.Name, now.Add(-24*time.Hour), now.Add(time.Hour))
		if err != nil {
			return nil, err
		}
		for i := range recs {
			s.Runs++
			switch recs[i].Status {
			case jobs.Running:
				s.Running++
			case jobs.Succeeded:
				s.Succeeded++
			case jobs.Failed:
				s.Failed++
			case jobs.Retrying:
				s.Retrying++
			case jobs.Dead:
				s.Dead++
			case jobs.Queued:
				s.Queued++
			}
			if s.Last == nil || !recs[i].FireTime.Before(s.Last.FireTime) {
				s.Last = &recs[i]
			}
		}
		if sched, err := def.Parse(); err == nil {
			s.Missing = len(c.missing(def, sched, recs, now))
		}
		out = append(out, s)
	}
	return out, nil
}

// missing lists the planned slots without a succeeded run, newest first,
// from the job's first run of the last 24 h (or its registration, when it
// has none: slots before a job existed are not missing) up to a minute
// ago (the current slot may be starting). recs: the job's runs read for
// the page, covering the last 24 h.
func (c *Console) missing(def jobs.Definition, s *jobs.Schedule, recs []jobs.Record, now time.Time) []time.Time {
	from := now.Add(-24 * time.Hour)
	first := def.UpdatedAt
	for _, rec := range recs {
		if rec.FireTime.Before(first) && !rec.FireTime.Before(from) && rec.FireTime.Before(now) {
			first = rec.FireTime
		}
	}
	if first.After(from) {
		from = first.Add(-time.Microsecond) // the window is (from, to]
	}
	miss := jobs.MissingIn(recs, s, def.Shards, from, now.Add(-time.Minute))
	sort.Slice(miss, func(i, j int) bool { return miss[i].After(miss[j]) })
	if len(miss) > c.opt.Limit {
		miss = miss[:c.opt.Limit]
	}
	return miss
}

func (c *Console) jobList(ctx context.Context, _ *http.Request, now time.Time) (string, any, error) {
	js, err := c.jobSummaries(ctx, now)
	return "Jobs", js, err
}

// RunRow is a run on a job's page.
type RunRow struct {
	jobs.Record
	Duration float64 // seconds; finished (or now, running) minus started
}

type jobData struct {
	Def     jobs.Definition
	Runs    []RunRow
	Missing []time.Time
	Chart   chart
}

func (c *Console) job(ctx context.Context, r *http.Request, now time.Time) (string, any, error) {
	name := r.PathValue("job")
	runs := jobs.NewRuns(c.db)
	def, sched, err := runs.Definition(ctx, name)
	if err != nil {
		return "Job " + name, nil, err // ErrUnknownJob: 404, ErrInvalid: 400
	}
	recs, err := runs.List(ctx, name, now.Add(-24*time.Hour), now.Add(time.Hour))
	if err != nil {
		return "Job " + name, nil, err
	}
	d := jobData{Def: def, Missing: c.missing(def, sched, recs, now)}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].FireTime.Equal(recs[j].FireTime) {
			return recs[i].FireTime.After(recs[j].FireTime)
		}
		return recs[i].Shard < recs[j].Shard
	})
	if len(recs) > c.opt.Limit {
		recs = recs[:c.opt.Limit]
	}
	var pts []point
	for i := len(recs) - 1; i >= 0; i-- {
		rr := RunRow{Record: recs[i]}
		if rr.StartedAt.Valid {
			end := now
			if rr.FinishedAt.Valid {
				end = rr.FinishedAt.Time
			}
			rr.Duration = end.Sub(rr.StartedAt.Time).Seconds()
		}
		d.Runs = append([]RunRow{rr}, d.Runs...)
		if len(pts) < 60 || i < 60 {
			pts = append(pts, point{Label: fmt.Sprintf("%s UTC, shard %d of %d", rr.FireTime.UTC().Format("Jan 2 15:04:05"), rr.Shard, rr.ShardTotal), Value: rr.Duration, Bad: rr.Status == jobs.Failed || rr.Status == jobs.Dead || rr.Status == jobs.Retrying})
		}
	}
	if len(pts) > 60 {
		pts = pts[len(pts)-60:]
	}
	d.Chart = barChart("Run duration in seconds (failed runs in red)", pts, "s", "one bar per run, by fire time: oldest left, newest right")
	return "Job " + name, d, nil
}

type outboxData struct {
	Stats         outbox.Stats
	Dead          []outbox.DeadMessage
	Throughput    chart
	Lag           chart
	PublishedHour int64
	// Slots: the streaming relays' replication slots (PostgreSQL).
	Slots []outbox.Slot
}

func (c *Console) outboxData(ctx context.Context) (outboxData, error) {
	var d outboxData
	adm := outbox.NewAdmin(c.db)
	var err error
	if d.Stats, err = adm.Stats(ctx); err != nil {
		return d, err
	}
	if d.Dead, err = adm.Dead(ctx, c.opt.Limit); err != nil {
		return d, err
	}
	for i := range d.Dead {
		d.Dead[i].LastError = redact.Text(d.Dead[i].LastError)
	}
	if d.Slots, err = outbox.Slots(ctx, c.db); err != nil {
		return d, err
	}
	count := make([]float64, 60)
	lag := make([]float64, 60)
	err = c.each(ctx, c.db.Dialect().Q().Console.OutboxSeries, func(r dialects.Rows) error {
		var ago, n int64
		var l float64
		if err := r.Scan(&ago, &n, &l); err != nil {
			return err
		}
		if ago >= 0 && ago < 60 {
			count[59-ago], lag[59-ago] = float64(n), l
			d.PublishedHour += n
		}
		return nil
	})
	tp := make([]point, 60)
	lp := make([]point, 60)
	for i := range tp {
		lbl := fmt.Sprintf("-%d min", 59-i)
		if i == 59 {
			lbl = "this minute"
		}
		tp[i] = point{Label: lbl, Value: count[i]}
		lp[i] = point{Label: lbl, Value: lag[i]}
	}
	d.Throughput = barChart("Published per minute, last hour", tp, "", "one bar per minute")
	d.Lag = barChart("Largest insert → publish lag per minute (s), last hour", lp, "s", "one bar per minute")
	return d, err
}

func (c *Console) outbox(ctx context.Context, _ *http.Request, now time.Time) (string, any, error) {
	d, err := c.outboxData(ctx)
	return "Outbox", d, err
}

// KeyCounts counts idempotency keys.
type KeyCounts struct{ Done, Pending, Stuck int64 }

// PendingKey is an idempotency key in progress (or stuck).
type PendingKey struct {
	Scope, Key string
	Age, Left  float64
}

type keysData struct {
	Counts  KeyCounts
	Pending []PendingKey
}

func (c *Console) keyCounts(ctx context.Context) (KeyCounts, error) {
	var k KeyCounts
	err := c.db.Executor().QueryRow(ctx, c.db.Dialect().Q().Console.KeyCounts).Scan(&k.Done, &k.Pending, &k.Stuck)
	return k, c.db.Dialect().Classify(err)
}

func (c *Console) keys(ctx context.Context, _ *http.Request, now time.Time) (string, any, error) {
	var d keysData
	var err error
	if d.Counts, err = c.keyCounts(ctx); err != nil {
		return "Idempotency keys", d, err
	}
	err = c.each(ctx, c.db.Dialect().Q().Console.KeysPending, func(r dialects.Rows) error {
		var k PendingKey
		var scope, key []byte
		if err := r.Scan(&scope, &key, &k.Age, &k.Left); err != nil {
			return err
		}
		k.Scope, k.Key = string(scope), string(key)
		d.Pending = append(d.Pending, k)
		return nil
	}, c.opt.Limit)
	return "Idempotency keys", d, err
}

// Group is a membership group.
type Group struct {
	Name          string
	Live, Expired int64
}

// SessionCounts are the web sessions' counts.
type SessionCounts struct{ Live, Users, Expired int64 }

type membersData struct {
	Groups   []Group
	Sessions SessionCounts
}

func (c *Console) memberData(ctx context.Context) (membersData, error) {
	var d membersData
	err := c.each(ctx, c.db.Dialect().Q().Console.MemberGroups, func(r dialects.Rows) error {
		var g Group
		if err := r.Scan(&g.Name, &g.Live, &g.Expired); err != nil {
			return err
		}
		d.Groups = append(d.Groups, g)
		return nil
	}, c.opt.Limit)
	if err != nil {
		return d, err
	}
	s := &d.Sessions
	err = c.db.Executor().QueryRow(ctx, c.db.Dialect().Q().WebSessionStats).Scan(&s.Live, &s.Users, &s.Expired)
	return d, c.db.Dialect().Classify(err)
}

func (c *Console) members(ctx context.Context, _ *http.Request, now time.Time) (string, any, error) {
	d, err := c.memberData(ctx)
	return "Members and sessions", d, err
}

type electionsData struct {
	Elections  []electionRow
	Semaphores []semaphoreRow
}

// electionRow and semaphoreRow carry their queue's first waiters (the
// head first) and how many wait.
type electionRow struct {
	coord.Leader
	Waiters []coord.Waiter
}

type semaphoreRow struct {
	coord.SemaphoreInfo
	Waiters []coord.Waiter
}

// shownWaiters is how many of a queue's waiters the page lists.
const shownWaiters = 20

func (c *Console) elections(ctx context.Context, _ *http.Request, now time.Time) (string, any, error) {
	const title = "Leaders and semaphores"
	var d electionsData
	es, err := coord.ListElections(ctx, c.db, 200)
	if err != nil {
		return title, nil, err
	}
	for _, e := range es {
		ws, err := coord.QueueWaiters(ctx, c.db, "election:"+e.Election, shownWaiters)
		if err != nil {
			return title, nil, err
		}
		d.Elections = append(d.Elections, electionRow{e, ws})
	}
	ss, err := coord.ListSemaphores(ctx, c.db, 200)
	if err != nil {
		return title, nil, err
	}
	for _, s := range ss {
		ws, err := coord.QueueWaiters(ctx, c.db, "semaphore:"+s.Name, shownWaiters)
		if err != nil {
			return title, nil, err
		}
		d.Semaphores = append(d.Semaphores, semaphoreRow{s, ws})
	}
	return title, d, nil
}

func (c *Console) now(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := c.db.Executor().QueryRow(ctx, c.db.Dialect().Q().Console.Now).Scan(&t)
	return t, c.db.Dialect().Classify(err)
}

type overviewData struct {
	LeasesLive, LeasesTotal int
	Locks                   locksData
	Jobs                    []JobSummary
	Outbox                  outboxData
	Keys                    KeyCounts
	Members                 membersData
	Sagas                   sagaCounts
}

// sagaCounts is the overview's card of global transactions.
type sagaCounts struct{ Live, Stuck int64 }

func (c *Console) overview(ctx context.Context, _ *http.Request, now time.Time) (string, any, error) {
	var d overviewData
	ls, err := c.leaseRows(ctx)
	if err != nil {
		return "Overview", nil, err
	}
	d.LeasesTotal = len(ls)
	for _, l := range ls {
		if l.Left > 0 {
			d.LeasesLive++
		}
	}
	if d.Locks, err = c.lockData(ctx); err != nil {
		return "Overview", nil, err
	}
	if d.Jobs, err = c.jobSummaries(ctx, now); err != nil {
		return "Overview", nil, err
	}
	if d.Outbox, err = c.outboxData(ctx); err != nil {
		return "Overview", nil, err
	}
	if d.Keys, err = c.keyCounts(ctx); err != nil {
		return "Overview", nil, err
	}
	counts, err := saga.Counts(ctx, c.db)
	if err != nil {
		return "Overview", nil, err
	}
	d.Sagas = sagaCounts{Live: counts["running"] + counts["confirming"] + counts["compensating"], Stuck: counts["stuck"]}
	d.Members, err = c.memberData(ctx)
	return "Overview", d, err
}

// lockDataName turns InnoDB's lock_data of a coord_locks key ('name', or
// 0x… for the binary column) back into the name.
func lockDataName(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], "\\'", "'")
	}
	if strings.HasPrefix(s, "0x") {
		if b, err := hex.DecodeString(s[2:]); err == nil && utf8.Valid(b) {
			return string(b)
		}
	}
	return s
}
