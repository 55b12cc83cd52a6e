package dialects

import (
	"sync"
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
	mu   sync.Mutex
	seen map[string]time.Time
}

// LockNamesTTL is how long LockNames trusts that a name's row exists.
const LockNamesTTL = time.Minute

const lockNamesMax = 10000

func (n *LockNames) known(name string) bool {
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.seen[name]
	if ok && time.Since(t) > LockNamesTTL {
		delete(n.seen, name)
		return false
	}
	return ok
}

func (n *LockNames) add(name string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil || len(n.seen) >= lockNamesMax {
		n.seen = make(map[string]time.Time)
	}
	n.seen[name] = time.Now()
}

// Forget drops every remembered name.
func (n *LockNames) Forget() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.seen = nil
	n.mu.Unlock()
}
