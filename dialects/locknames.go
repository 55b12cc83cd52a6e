package dialects

import (
	"sync"
	"sync/atomic"
	"time"
)

// LockNames remembers, for one client, the lock names whose coord_locks
// row a lock statement saw, so that later locks of a name skip looking
// for it (PostgreSQL: the row only lets the console name a held lock; the
// lock itself needs no row). Nothing about a lock's safety depends on it:
// a wrong entry only leaves a held lock unnamed in the console.
//
// An entry lasts LockNamesTTL, so a row deleted by CleanupLocks elsewhere
// is registered again by a lock within that long; Forget drops every
// entry (after a cleanup in this process). At most lockNamesMax names are
// remembered. The zero value is ready; a nil *LockNames remembers
// nothing (every lock looks). Safe for concurrent use.
type LockNames struct {
	seen sync.Map // name → time.Time it was seen registered
	n    atomic.Int64
}

// LockNamesTTL is how long LockNames trusts that a name's row exists.
const LockNamesTTL = time.Minute

const lockNamesMax = 10000

func (n *LockNames) known(name string) bool {
	if n == nil {
		return false
	}
	t, ok := n.seen.Load(name)
	if ok && time.Since(t.(time.Time)) > LockNamesTTL {
		if n.seen.CompareAndDelete(name, t) {
			n.n.Add(-1)
		}
		return false
	}
	return ok
}

func (n *LockNames) add(name string) {
	if n == nil {
		return
	}
	if n.n.Load() >= lockNamesMax {
		n.Forget()
	}
	if _, loaded := n.seen.Swap(name, time.Now()); !loaded {
		n.n.Add(1)
	}
}

// Forget drops every remembered name.
func (n *LockNames) Forget() {
	if n == nil {
		return
	}
	n.seen.Range(func(k, _ any) bool {
		if _, ok := n.seen.LoadAndDelete(k); ok {
			n.n.Add(-1)
		}
		return true
	})
}
