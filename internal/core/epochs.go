package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
)

// Epochs is a client's memory of the newest failover epoch it has seen: a
// high-water mark that only goes up. Every statement that issues or
// checks a counter that must never go back (a lease's fencing token, a
// fenced write, a segment range, a job attempt, a worker grant) carries it
// to the server, which refuses with sqlcoord.ErrStalePrimary when it
// writes in an older epoch — an old primary still running after a
// promotion (split brain), or a restored database — and returns the epoch
// it wrote in, which raises the mark. Each driver has one; with
// Options.EpochFile it is kept in a file, so a restarted client remembers
// it too. See docs/failover.md.
type Epochs struct {
	seen atomic.Int64
	file string
	mu   sync.Mutex // serialises writes of file
}

// NewEpochs returns a mark read from file ("": in memory only). A file
// that does not exist yet starts at 0; one that cannot be read is an
// error (a client that forgot its mark would accept a stale primary).
func NewEpochs(file string) (*Epochs, error) {
	e := &Epochs{file: file}
	if file == "" {
		return e, nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return e, nil
	}
	if err != nil {
		return nil, errs.Errorf("sqlcoord: epoch file: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return nil, fmt.Errorf("sqlcoord: epoch file %s: not an epoch: %q", file, strings.TrimSpace(string(b)))
	}
	e.seen.Store(v)
	return e, nil
}

// Seen is the newest epoch seen (0: none since the first fork).
func (e *Epochs) Seen() int64 {
	if e == nil {
		return 0
	}
	return e.seen.Load()
}

// observe raises the mark to epoch (never lowers it) and, with a file,
// writes it there before returning (a temporary file, fsync, rename).
func (e *Epochs) observe(epoch int64) error {
	if e == nil {
		return nil
	}
	for {
		cur := e.seen.Load()
		if epoch <= cur {
			return nil
		}
		if e.seen.CompareAndSwap(cur, epoch) {
			break
		}
	}
	if e.file == "" {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.seen.Load() // the highest by now
	tmp, err := os.CreateTemp(filepath.Dir(e.file), ".sqlcoord-epoch-*")
	if err != nil {
		return errs.Errorf("sqlcoord: epoch file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := fmt.Fprintf(tmp, "%d\n", v); err != nil {
		tmp.Close()
		return errs.Errorf("sqlcoord: epoch file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return errs.Errorf("sqlcoord: epoch file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return errs.Errorf("sqlcoord: epoch file: %w", err)
	}
	if err := os.Rename(tmp.Name(), e.file); err != nil {
		return errs.Errorf("sqlcoord: epoch file: %w", err)
	}
	return nil
}

// OpenEpochs reads the mark from file and, when it says the client has
// seen a fork, checks the server against it with check (which runs a
// statement carrying the mark) — not on a server opened read-only, nor on
// one without the schema yet. The one opening path of every driver.
func OpenEpochs(ctx context.Context, file string, readOnly bool, check func(context.Context, *Epochs) error) (*Epochs, error) {
	e, err := NewEpochs(file)
	if err != nil || e.Seen() == 0 || readOnly {
		return e, err
	}
	if err := check(ctx, e); err != nil && !errors.Is(err, dialects.ErrNoSchema) {
		return nil, err
	}
	return e, nil
}

// ObserveEpoch raises db's high-water mark to epoch, an epoch a statement
// of sqlcoord's reported. It is not a method of Epochs: a user raising
// the mark by hand would make every token of the current epoch stale.
func ObserveEpoch(e *Epochs, epoch int64) error { return e.observe(epoch) }
