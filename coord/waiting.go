package coord

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

// Waiting costs the database one committed row per wait and nothing held
// open (migration 25; dialects/waiting.go has the statements).
//
// A Client that waits — AcquireWait, Campaign, Semaphore.Acquire — or
// observes (Observe) has one waiter: a row of coord_waiters renewed by one
// UPDATE per renewal whatever the number of its waits, one goroutine that
// reads every queue the Client waits in with one statement per kind, and
// one wake-up source — on PostgreSQL one listening connection (a NOTIFY on
// the waiter's own channel, sent by the statement that freed what it waits
// for), on MySQL/MariaDB one connection waiting for a user-level lock
// that another holds, which a releasing client interrupts with KILL QUERY. Each wait is a ticket in
// its queue; the head of a queue is its oldest live ticket, and the
// statement that grants a lease refuses anyone else while the queue has a
// head, so waiters are served in the order they queued and a holder that
// releases and at once acquires again goes to the back.
//
// The waiter reads its queues when woken, when what it waits for may have
// changed by the clock (a lease or a head's waiter row expiring: the
// earliest such time of all its queues), and at a safety interval in case
// a wake-up was lost. A renewing holder moves its lease's expiry by a
// third of its TTL each time, so even a thousand waits on renewing leases
// cost the Client about one read per two thirds of the shortest TTL.

// waitKind is what a ticket's queue guards.
type waitKind int

const (
	waitLease     waitKind = iota // a lease (also an election's leadership)
	waitSemaphore                 // a semaphore's permits
)

// wait is one waiting call: a ticket in queue for owner.
type wait struct {
	kind  waitKind
	queue string // the ticket's queue: a lease name, or "semaphore:" + name
	key   string // what is read: the lease name, or the semaphore's name
	owner string
	ttl   time.Duration
	kick  chan struct{} // 1-buffered: try now
	seq   int64         // the ticket (0: none yet); under waiting.mu
	// byTicket: kicked by a wake-up naming its ticket, without the read
	// of the queues that wake-up would otherwise cost; under waiting.mu
	byTicket bool
	// granted: the grant deleted the ticket itself (PostgreSQL), so done
	// has none to drop but may still owe the next head its wake-up;
	// under waiting.mu
	granted bool
}

// observation is one Observe of an election.
type observation struct {
	queue string // the election's lease name
	ttl   time.Duration
	kick  chan struct{}
	last  dialects.QueueState
	seen  bool
}

// Defaults of the waiter's timing.
const (
	// minWaiterTTL and maxWaiterTTL bound a waiter row's TTL: the shortest
	// TTL among its waits, within these. A waiter that dies or freezes
	// stops counting (its tickets are skipped) once it passed.
	minWaiterTTL = 1500 * time.Millisecond
	maxWaiterTTL = 15 * time.Second
	// waiterLinger keeps an idle waiter registered for a moment, for the
	// Client's next wait.
	waiterLinger = 3 * time.Second
	// minReadGap spaces reads that the clock (not a wake-up) asks for.
	minReadGap = 2 * time.Millisecond
	// safetySleeping and safetyListening are the longest a Client that
	// can be woken goes without reading its queues: on MySQL/MariaDB a
	// ring can miss (it arrived between two waits, or from a client on
	// another Galera node); on PostgreSQL a NOTIFY is lost only while the
	// listener reconnects, which asks for a read when it is back.
	safetySleeping  = 500 * time.Millisecond
	safetyListening = 5 * time.Second
	// DefaultWaitPoll is how often a Client that cannot be woken (a
	// transaction-mode pooler in front of PostgreSQL, MySQL without
	// KILL rights) reads its queues; ClientOptions.PollInterval.
	DefaultWaitPoll = 200 * time.Millisecond
)

// waiting is a Client's waiter (see above).
type waiting struct {
	base sqlcoord.Base
	d    *dialects.Dialect
	opt  ClientOptions

	mu      sync.Mutex
	waits   map[*wait]struct{}
	obs     map[*observation]struct{}
	drops   []drop // tickets to delete (a failed delete is retried)
	running bool
	id      int64         // the waiter row (0: not registered)
	ready   chan struct{} // closed once registered (or given up)
	regErr  error         // why registration failed (ready closed)
	poke    chan struct{} // 1-buffered: read now
	kicked  bool          // the last wake-up named a ticket of ours; under mu
	ttl     time.Duration // the TTL the row was last renewed with

	wakeable atomic.Bool // a wake-up can reach us now
}

type drop struct {
	queue    string
	seq      int64
	wakeNext bool
}

func newWaiting(base sqlcoord.Base, opt ClientOptions) *waiting {
	if opt.PollInterval <= 0 {
		opt.PollInterval = DefaultWaitPoll
	}
	return &waiting{base: base, d: base.Dialect(), opt: opt, waits: map[*wait]struct{}{}, obs: map[*observation]struct{}{}, poke: make(chan struct{}, 1)}
}

func (h *waiting) pool() dialects.Executor { return h.base.Executor() }

// pokeLocked asks the loop to read now.
func (h *waiting) pokeNow() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// start runs the loop unless it runs; mu held.
func (h *waiting) startLocked() {
	if h.running {
		return
	}
	h.running = true
	h.ready = make(chan struct{})
	h.regErr = nil
	go h.loop()
}

// registered waits until the waiter row exists and returns its id.
func (h *waiting) registered(ctx context.Context) (int64, error) {
	h.mu.Lock()
	ready := h.ready
	h.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.id, h.regErr
}

// join queues w: registers the waiter if needed and takes a ticket.
func (h *waiting) join(ctx context.Context, w *wait) error {
	h.mu.Lock()
	h.waits[w] = struct{}{}
	h.startLocked()
	h.mu.Unlock()
	for {
		id, err := h.registered(ctx)
		if err != nil {
			h.remove(w)
			return err
		}
		h.shorten(ctx, id)
		seq, err := h.d.TicketTake(ctx, h.pool(), w.queue, id, w.owner)
		if err != nil {
			h.remove(w)
			return err
		}
		h.mu.Lock()
		if h.id == id {
			w.seq = seq
			h.mu.Unlock()
			h.pokeNow()
			return nil
		}
		// re-registered meanwhile: the ticket belongs to a dead waiter row
		h.drops = append(h.drops, drop{queue: w.queue, seq: seq})
		h.mu.Unlock()
	}
}

// done ends w: its ticket is deleted, waking the queue's next head when
// wakeNext (a semaphore with permits left, or w gave up at the head).
func (h *waiting) done(ctx context.Context, w *wait, wakeNext bool) {
	h.mu.Lock()
	seq, granted := w.seq, w.granted
	w.seq = 0
	h.mu.Unlock()
	if seq == 0 && granted && wakeNext {
		// The grant deleted the ticket and woke nobody: two releases in a
		// row both wake the same head (it still queues until its grant),
		// and the waiter behind it would sleep — a permit free — until
		// its safety read. Wake the queue's head now (best effort: that
		// read still follows).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		h.d.RingQueue(dctx, h.pool(), w.queue, false)
		cancel()
	}
	if seq != 0 {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := h.d.TicketDrop(dctx, h.pool(), w.queue, seq, wakeNext)
		cancel()
		if err != nil {
			// retried by the loop: a ticket left behind would head the queue
			h.mu.Lock()
			h.drops = append(h.drops, drop{w.queue, seq, wakeNext})
			h.mu.Unlock()
		}
	}
	h.remove(w)
}

// kickTicket tries the wait holding ticket payload (a number) now: a
// release names the head's ticket in its wake-up. The statement that
// grants decides whose turn it is, so a wait kicked early costs one
// refused acquire at most, after which the queues are read (missed).
func (h *waiting) kickTicket(payload string) {
	seq, err := strconv.ParseInt(payload, 10, 64)
	if err != nil || seq <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.waits {
		if w.seq == seq {
			w.byTicket, h.kicked = true, true
			kickWait(w)
			return
		}
	}
}

// ringUnlessKicked reads the queues on a wake-up, unless the wake-up named
// one of this Client's tickets (kickTicket): that wait tries at once, and
// the queues are read only if its try fails (missed). When many leases
// are released at once, a wake-up then costs its waiter one statement,
// not also a read of every queue its Client waits in.
func (h *waiting) ringUnlessKicked(ring func()) func() {
	return func() {
		h.mu.Lock()
		kicked := h.kicked
		h.kicked = false
		h.mu.Unlock()
		if !kicked {
			ring()
		}
	}
}

// missed is called by a wait whose try failed: after a kick by its
// ticket, the read that wake-up skipped happens now.
func (h *waiting) missed(w *wait) {
	h.mu.Lock()
	by := w.byTicket
	w.byTicket = false
	h.mu.Unlock()
	if by {
		h.pokeNow()
	}
}

// ticket is w's ticket (0: none yet).
func (h *waiting) ticket(w *wait) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.seq
}

// ticketDropped records that the statement granting w's lease deleted
// its ticket seq: done has nothing left to delete.
func (h *waiting) ticketDropped(w *wait, seq int64) {
	h.mu.Lock()
	if w.seq == seq {
		w.seq, w.granted = 0, true
	}
	h.mu.Unlock()
}

func (h *waiting) remove(w *wait) {
	h.mu.Lock()
	delete(h.waits, w)
	h.mu.Unlock()
	h.pokeNow()
}

// observe registers o; unobserve ends it.
func (h *waiting) observe(o *observation) {
	h.mu.Lock()
	h.obs[o] = struct{}{}
	h.startLocked()
	h.mu.Unlock()
	h.pokeNow()
}

func (h *waiting) unobserve(o *observation) {
	h.mu.Lock()
	delete(h.obs, o)
	h.mu.Unlock()
	h.pokeNow()
}

// waiterTTL is the row's TTL for the current waits (the shortest of
// theirs, within bounds; the shortest bound when none waits, so that the
// next wait's ticket never outlives a dead process longer than its own
// TTL); mu held.
func (h *waiting) waiterTTLLocked() time.Duration {
	if len(h.waits) == 0 && len(h.obs) == 0 {
		return minWaiterTTL
	}
	ttl := maxWaiterTTL
	for w := range h.waits {
		ttl = min(ttl, w.ttl)
	}
	for o := range h.obs {
		ttl = min(ttl, o.ttl)
	}
	return max(ttl, minWaiterTTL)
}

// shorten renews the waiter row at once when a wait just joined needs a
// shorter TTL than the row has: its ticket must not count for a dead
// process longer than the wait's own TTL (the loop's next renewal could
// come after the process died).
func (h *waiting) shorten(ctx context.Context, id int64) {
	h.mu.Lock()
	want, have := h.waiterTTLLocked(), h.ttl
	h.mu.Unlock()
	if want >= have {
		return
	}
	if ok, err := h.d.WaiterRenew(ctx, h.pool(), id, 0, want); err == nil && ok {
		h.mu.Lock()
		if h.id == id {
			h.ttl = min(h.ttl, want)
		}
		h.mu.Unlock()
	}
}

func (h *waiting) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waits) == 0 && len(h.obs) == 0 && len(h.drops) == 0
}

// loop is the waiter's one goroutine: it registers, renews, keeps the
// wake-up source, reads the queues and kicks the waits whose turn it is.
func (h *waiting) loop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		rung     = make(chan struct{}, 1)
		wakeStop context.CancelFunc
		wakeDone chan struct{}
	)
	stopWake := func() {
		if wakeStop != nil {
			wakeStop()
			<-wakeDone
			wakeStop = nil
		}
		h.wakeable.Store(false)
	}
	defer stopWake()

	// register (again after the row was lost): a new id, tickets taken
	// again at the back of their queues, observations recorded again
	register := func() bool {
		for attempt := 1; ; attempt++ {
			if h.idle() {
				return false
			}
			h.mu.Lock()
			ttl := h.waiterTTLLocked()
			h.mu.Unlock()
			id, err := h.d.WaiterRegister(ctx, h.pool(), NewOwnerID(), ttl)
			if err == nil {
				h.mu.Lock()
				old := h.id
				h.id, h.ttl = id, ttl
				if old == 0 {
					close(h.ready)
				}
				waits := make([]*wait, 0, len(h.waits))
				for w := range h.waits {
					if w.seq != 0 {
						waits = append(waits, w)
						w.seq = 0
					}
				}
				obs := make([]*observation, 0, len(h.obs))
				for o := range h.obs {
					obs = append(obs, o)
				}
				h.mu.Unlock()
				for _, w := range waits {
					if seq, err := h.d.TicketTake(ctx, h.pool(), w.queue, id, w.owner); err == nil {
						h.mu.Lock()
						w.seq = seq
						h.mu.Unlock()
					}
					kickWait(w)
				}
				for _, o := range obs {
					_ = h.d.ObserverAdd(ctx, h.pool(), o.queue, id)
				}
				stopWake()
				wakeStop, wakeDone = h.startWake(ctx, id, rung)
				return true
			}
			if permanent(h.d.Classify(err)) {
				h.mu.Lock()
				if h.id == 0 {
					h.regErr = h.d.Classify(err)
					close(h.ready)
					h.running = false
					h.ready = nil
				}
				h.mu.Unlock()
				h.failAll()
				return false
			}
			if backoff.Sleep(ctx, backoff.Policy{Base: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Full}.Delay(attempt)) != nil {
				return false
			}
		}
	}
	if !register() {
		h.finish()
		return
	}

	observed := map[*observation]bool{}
	ttl := func() time.Duration {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.ttl
	}
	renewAt := time.Now().Add(ttl() / 3)
	cleanupAt := time.Now().Add(10 * time.Second)
	var (
		idleSince time.Time
		next      time.Time // when the clock asks for a read
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := time.Now()
		if h.idle() {
			if idleSince.IsZero() {
				idleSince = now
			}
			if now.Sub(idleSince) >= waiterLinger {
				h.mu.Lock()
				if len(h.waits) == 0 && len(h.obs) == 0 && len(h.drops) == 0 {
					id := h.id
					h.id, h.running, h.ready = 0, false, nil
					h.mu.Unlock()
					stopWake()
					ectx, ecancel := context.WithTimeout(context.Background(), 5*time.Second)
					_ = h.d.WaiterEnd(ectx, h.pool(), id)
					ecancel()
					return
				}
				h.mu.Unlock()
			}
		} else {
			idleSince = time.Time{}
		}
		// renew the row (sooner when a shorter TTL joined)
		h.mu.Lock()
		want := h.waiterTTLLocked()
		h.mu.Unlock()
		if want != ttl() {
			renewAt = now // a shorter TTL joined, or the longest left
		}
		if !now.Before(renewAt) {
			rctx, rcancel := context.WithTimeout(ctx, want)
			ok, err := h.d.WaiterRenew(rctx, h.pool(), h.currentID(), 0, want)
			rcancel()
			switch {
			case err == nil && ok:
				h.mu.Lock()
				h.ttl = want
				h.mu.Unlock()
				renewAt = now.Add(want / 3)
			case err == nil && !ok:
				// the row expired (this process froze, or could not reach
				// the database for a TTL): its tickets no longer count
				if !register() {
					h.finish()
					return
				}
				observed = map[*observation]bool{}
				renewAt = time.Now().Add(ttl() / 3)
			default:
				renewAt = now.Add(min(want/10, time.Second))
			}
		}
		if !now.Before(cleanupAt) {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = h.d.WaiterCleanup(cctx, h.pool(), time.Minute, 100)
			ccancel()
			cleanupAt = now.Add(10 * time.Second)
		}
		h.retryDrops(ctx)
		h.syncObservers(ctx, observed)
		next = h.read(ctx)
		// wait for a wake-up, the clock, a change, or the next renewal
		d := time.Until(next)
		safety := h.opt.PollInterval
		if h.wakeable.Load() {
			safety = safetyListening
			if h.d.CanSleep() {
				safety = safetySleeping
			}
		}
		d = min(max(d, minReadGap), safety, time.Until(renewAt), waiterLinger)
		if !idleSince.IsZero() {
			d = min(d, waiterLinger-time.Since(idleSince))
		}
		timer.Reset(max(d, 0))
		select {
		case <-rung:
		case <-h.poke:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (h *waiting) currentID() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.id
}

// finish ends the loop after registration failed for good.
func (h *waiting) finish() {
	h.mu.Lock()
	if h.running {
		h.running = false
		if h.ready != nil && h.id == 0 {
			select {
			case <-h.ready:
			default:
				close(h.ready)
			}
		}
		h.ready = nil
		h.id = 0
	}
	h.mu.Unlock()
}

// failAll kicks every wait so that each sees the registration error.
func (h *waiting) failAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.waits {
		kickWait(w)
	}
}

func kickWait(w *wait) {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// retryDrops deletes the tickets whose delete failed.
func (h *waiting) retryDrops(ctx context.Context) {
	h.mu.Lock()
	drops := h.drops
	h.drops = nil
	h.mu.Unlock()
	var left []drop
	for _, d := range drops {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := h.d.TicketDrop(dctx, h.pool(), d.queue, d.seq, d.wakeNext); err != nil {
			left = append(left, d)
		}
		cancel()
	}
	if len(left) > 0 {
		h.mu.Lock()
		h.drops = append(h.drops, left...)
		h.mu.Unlock()
	}
}

// syncObservers records new observations and forgets ended ones.
func (h *waiting) syncObservers(ctx context.Context, observed map[*observation]bool) {
	h.mu.Lock()
	id := h.id
	var add []*observation
	for o := range h.obs {
		if !observed[o] {
			add = append(add, o)
		}
	}
	var gone []*observation
	for o := range observed {
		if _, ok := h.obs[o]; !ok {
			gone = append(gone, o)
		}
	}
	live := map[string]bool{}
	for o := range h.obs {
		live[o.queue] = true
	}
	h.mu.Unlock()
	for _, o := range add {
		if h.d.ObserverAdd(ctx, h.pool(), o.queue, id) == nil {
			observed[o] = true
		}
	}
	for _, o := range gone {
		delete(observed, o)
		if !live[o.queue] {
			_ = h.d.ObserverRemove(ctx, h.pool(), o.queue, id)
		}
	}
}

// read reads every queue of the Client, kicks the waits at the head of a
// free resource and the observers whose election changed, and returns when
// the clock asks for the next read.
func (h *waiting) read(ctx context.Context) time.Time {
	h.mu.Lock()
	var (
		leases = map[string][]*wait{}
		sems   = map[string][]*wait{}
		obs    = map[string][]*observation{}
	)
	for w := range h.waits {
		if w.kind == waitSemaphore {
			sems[w.key] = append(sems[w.key], w)
		} else {
			leases[w.key] = append(leases[w.key], w)
		}
	}
	for o := range h.obs {
		obs[o.queue] = append(obs[o.queue], o)
	}
	h.mu.Unlock()
	next := time.Now().Add(time.Hour)
	at := func(s dialects.QueueState, t time.Time) {
		if !t.IsZero() {
			if local := time.Now().Add(t.Sub(s.Now) + time.Millisecond); local.Before(next) {
				next = local
			}
		}
	}
	names := make([]string, 0, len(leases)+len(obs))
	for n := range leases {
		names = append(names, n)
	}
	for n := range obs {
		if _, ok := leases[n]; !ok {
			names = append(names, n)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	failed := false
	if len(names) > 0 {
		states, err := h.d.LeaseQueues(rctx, h.pool(), names)
		if err != nil {
			failed = true
		}
		for _, s := range states {
			for _, w := range leases[s.Queue] {
				h.consider(w, s, !s.Live(), at)
				if s.Live() {
					at(s, s.ExpiresAt)
				}
			}
			for _, o := range obs[s.Queue] {
				if !o.seen || o.last.Token != s.Token || o.last.Live() != s.Live() || !o.last.Version.Equal(s.Version) {
					o.last, o.seen = s, true
					select {
					case o.kick <- struct{}{}:
					default:
					}
				}
				if s.Live() {
					at(s, s.ExpiresAt)
				}
			}
		}
	}
	if len(sems) > 0 {
		names := make([]string, 0, len(sems))
		for n := range sems {
			names = append(names, n)
		}
		states, err := h.d.SemaphoreQueues(rctx, h.pool(), names)
		if err != nil {
			failed = true
		}
		for _, s := range states {
			free := s.Free(true) || s.Permits == 0
			for _, w := range sems[s.Queue] {
				h.consider(w, s, free, at)
			}
			if !free {
				at(s, s.NextExpiry)
			}
		}
	}
	if failed {
		next = time.Now().Add(100 * time.Millisecond)
	}
	return next
}

// consider kicks w when its ticket heads a free resource (or the queue has
// no live head: the grant statement decides), and asks for a read when the
// head's waiter may expire first.
func (h *waiting) consider(w *wait, s dialects.QueueState, free bool, at func(dialects.QueueState, time.Time)) {
	h.mu.Lock()
	seq := w.seq
	h.mu.Unlock()
	if seq == 0 {
		return
	}
	if free && (s.HeadSeq == seq || s.HeadSeq == 0) {
		kickWait(w)
		return
	}
	if s.HeadSeq != 0 && s.HeadSeq != seq {
		at(s, s.HeadExpires) // the head's waiter may die: we may be next
	}
}

// startWake starts the wake-up source of waiter id: rung gets a value for
// every wake-up. PostgreSQL: LISTEN on the waiter's channel (through
// ClientOptions.Listener, or the driver); MySQL family: a lock wait on a
// connection of its own (sleepOn).
func (h *waiting) startWake(parent context.Context, id int64, rung chan struct{}) (context.CancelFunc, chan struct{}) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	ring := func() {
		select {
		case rung <- struct{}{}:
		default:
		}
	}
	if h.d.CanSleep() {
		opener := h.base
		go func() {
			defer close(done)
			for attempt := 1; ctx.Err() == nil; attempt++ {
				if h.sleepOn(ctx, opener, id, ring) {
					attempt = 0
				}
				if backoff.Sleep(ctx, backoff.Policy{Base: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: backoff.Full}.Delay(attempt)) != nil {
					return
				}
			}
		}()
		return cancel, done
	}
	lis := h.opt.Listener
	if lis == nil {
		if l, ok := h.base.(sqlcoord.Listener); ok && l.CanListen() == nil {
			lis = l
		}
	}
	if lis == nil {
		close(done)
		return cancel, done
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			opt := sqlcoord.ListenOptions{Probe: true, ProbeTimeout: 2 * time.Second, Ready: func() {
				h.wakeable.Store(true)
				ring() // read once: a wake-up sent before LISTEN was lost
			}, Payload: h.kickTicket}
			_ = lis.Listen(ctx, dialects.WaiterChannel(id), opt, h.ringUnlessKicked(ring))
			h.wakeable.Store(false)
			if backoff.Sleep(ctx, time.Second) != nil {
				return
			}
		}
	}()
	return cancel, done
}

// sleepOn keeps waiter id's two connections of its own (MySQL family):
// one holds the waiter's lock, the other waits for it until a releasing
// client interrupts the wait (KILL QUERY) — each interruption is a
// wake-up. It returns when ctx ends or a connection fails; true when it
// got as far as waiting.
func (h *waiting) sleepOn(ctx context.Context, opener core.Sealed, id int64, ring func()) bool {
	hold, closeHold, err := core.OwnConn(ctx, opener)
	if err != nil {
		return false
	}
	defer closeHold()
	if err := h.d.Hold(ctx, hold, id); err != nil {
		return false
	}
	conn, closeConn, err := core.OwnConn(ctx, opener)
	if err != nil {
		return false
	}
	defer closeConn()
	defer h.wakeable.Store(false)
	first := true
	for ctx.Err() == nil {
		if first {
			// reachable from now on (a ring finds the wait by its text; one
			// sent before it starts is caught by the read this asks for)
			h.wakeable.Store(true)
			ring()
			first = false
		}
		woken, unheld, err := h.d.Sleep(ctx, conn, id)
		if err != nil || unheld {
			break // the holding connection is gone: take the lock anew
		}
		if woken {
			ring()
		}
	}
	if ctx.Err() != nil {
		// interrupt our own wait, so that the server ends it now
		ectx, ecancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = h.d.Ring(ectx, h.pool(), id)
		ecancel()
	}
	return true
}

// Waiter is one wait in a queue, as operators see it (Election.Waiters,
// Semaphore.Waiters, Client.LeaseWaiters): in arrival order, the head
// first.
type Waiter struct {
	// Owner is the lease owner it waits to become: a candidate's id, a
	// permit's or a lease's owner.
	Owner string
	// Client names the waiting Client (host:pid:…); Since is when it
	// queued (database clock).
	Client string
	Since  time.Time
	// Live: its Client renewed its waiter row in time, so the wait counts;
	// a dead one (its process died or froze) is skipped and cleaned up.
	Live bool
}

// QueueWaiters lists up to limit waits in queue (a lease's name, an
// election's "election:" + name, a semaphore's "semaphore:" + name), in
// arrival order; limit ≤ 0 means 100. For any driver (the CLI's, the
// console's).
func QueueWaiters(ctx context.Context, db sqlcoord.Base, queue string, limit int) ([]Waiter, error) {
	if limit <= 0 {
		limit = 100
	}
	ts, err := db.Dialect().Tickets(ctx, db.Executor(), queue, limit)
	if err != nil {
		return nil, errs.Errorf("coord: list the waiters of %s: %w", valid.Quote(queue), db.Dialect().Classify(err))
	}
	out := make([]Waiter, 0, len(ts))
	for _, t := range ts {
		out = append(out, Waiter{Owner: t.Owner, Client: t.Label, Since: t.Since, Live: t.Live})
	}
	return out, nil
}

// LeaseWaiters lists the waits for lease name (AcquireWait), in arrival
// order.
func (c *Leases) LeaseWaiters(ctx context.Context, name string) ([]Waiter, error) {
	if err := validName("lease", name); err != nil {
		return nil, err
	}
	return QueueWaiters(ctx, c.drv, name, 0)
}

// Waiters lists the candidates waiting in Campaign, in arrival order (the
// next leader first).
func (e *Election[TTx]) Waiters(ctx context.Context) ([]Waiter, error) {
	return QueueWaiters(ctx, e.c.drv, e.lease, 0)
}

// Waiters lists the callers waiting in Acquire for a permit, in arrival
// order.
func (s *Semaphore[TTx]) Waiters(ctx context.Context) ([]Waiter, error) {
	return QueueWaiters(ctx, s.c.drv, s.queue(), 0)
}
