package saga

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

// Options tune a Coordinator's drivers (Run). The zero value is sensible.
type Options struct {
	// Owner names this driver in the table and the console (default
	// host-pid).
	Owner string
	// Lease is how long a claim stays this driver's without progress;
	// every recorded step renews it. A driver frozen longer is taken over.
	// Default 30 s; it must exceed CallTimeout.
	Lease time.Duration
	// CallTimeout bounds one branch call (default 10 s).
	CallTimeout time.Duration
	// Poll is how often an idle driver looks for due transactions
	// (default 200 ms).
	Poll time.Duration
	// Workers is how many transactions one driver drives at once
	// (default 4).
	Workers int
	// RetryBase and RetryMax bound the backoff between calls of a
	// failing branch (defaults 100 ms and 30 s; jittered).
	RetryBase, RetryMax time.Duration
	// StuckAfter: a Confirm, Cancel or Compensate that failed this many
	// times in a row makes the transaction stuck, for a person (default
	// 20; its business failure does at once).
	StuckAfter int
	// HTTPClient calls URL branches (default: a client without timeout of
	// its own; CallTimeout bounds each call). Add credentials here.
	HTTPClient *http.Client
	// Logger receives the driver's events (default: discarded).
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	for name, d := range map[string]time.Duration{"Lease": o.Lease, "CallTimeout": o.CallTimeout, "Poll": o.Poll, "RetryBase": o.RetryBase, "RetryMax": o.RetryMax} {
		if d < 0 {
			return o, errs.Errorf("%w: negative %s %v", ErrInvalid, name, d)
		}
	}
	if o.Workers < 0 || o.StuckAfter < 0 {
		return o, errs.Errorf("%w: negative Workers or StuckAfter", ErrInvalid)
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + "-" + strconv.Itoa(os.Getpid())
	}
	if err := valid.Text("owner", o.Owner, 255); err != nil {
		return o, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Lease, 30*time.Second)
	def(&o.CallTimeout, 10*time.Second)
	def(&o.Poll, 200*time.Millisecond)
	def(&o.RetryBase, 100*time.Millisecond)
	def(&o.RetryMax, 30*time.Second)
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.StuckAfter == 0 {
		o.StuckAfter = 20
	}
	if o.Lease <= o.CallTimeout {
		return o, errs.Errorf("%w: Lease %v must exceed CallTimeout %v (a call outliving the claim would race the driver taking over)", ErrInvalid, o.Lease, o.CallTimeout)
	}
	if o.RetryMax < o.RetryBase {
		return o, errs.Errorf("%w: RetryMax %v below RetryBase %v", ErrInvalid, o.RetryMax, o.RetryBase)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// funcs is the registry of branch functions.
type funcs struct {
	mu sync.RWMutex
	m  map[string]Func
}

func (f *funcs) put(name string, fn Func) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[name] = fn
}

func (f *funcs) get(name string) (Func, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn, ok := f.m[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTarget, valid.Quote(name))
	}
	return fn, nil
}
