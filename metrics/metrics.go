// Package metrics is sqlcoord's measurement hook: a Recorder set on a
// driver (sqlcoord.Options.Metrics) sees every helper call with
// its outcome and duration, txn.Do's retries and unknown commits, lease
// renewal failures and losses, scheduled job runs and takeovers, the
// relay's publishes, and the elections this process leads. Off (nothing recorded, no allocation) unless set.
//
// This package imports nothing but the standard library, so coord and txn
// stay lean; metrics/prom implements Recorder with Prometheus.
//
// Labels are bounded: op names are fixed, outcomes a small set
// ("ok", "locked", "timeout", "conflict", "canceled", "error", …), job
// and topic and election names are the application's own (as many as it
// has jobs, topics and elections). Lock, lease and key names are never labels.
package metrics

import "time"

// Recorder receives measurements. Implementations must be safe for
// concurrent use and quick: they are called inline. Embed Nop to stay
// source-compatible when methods are added.
type Recorder interface {
	// Call is one helper call: op is "lock.try", "lock.wait",
	// "lease.acquire", "lease.renew", "lease.release", "fence",
	// "fence.update", "txn.do", "keys.begin", "keys.complete",
	// "barrier", "outbox.enqueue", "outbox.batch", "job.run", …; d is its
	// duration (for lock.wait and lock.try: the time spent getting the
	// lock).
	Call(op, dialect, outcome string, d time.Duration)
	// TxnRetry: txn.Do runs its function again after reason
	// ("deadlock", "serialization", "conn_lost", "error").
	TxnRetry(dialect, reason string)
	// TxnCommitUnknown: COMMIT's outcome was unknown; resolved is
	// "committed", "not_committed" or "unknown" (ErrCommitUnknown
	// returned).
	TxnCommitUnknown(dialect, resolved string)
	// LeaseRenewFailed: a keep-alive renewal failed; lost reports that
	// the lease is gone (taken over or expired) rather than a transient
	// error.
	LeaseRenewFailed(dialect string, lost bool)
	// JobRun: a scheduled run ended; outcome is "succeeded", "failed"
	// (no retry policy), "retry" (failed, will run again), "dead" (failed
	// its last attempt, or permanently), "superseded" or "canceled"; fireToStart is from the planned fire
	// time to the claim; d is the run's duration.
	JobRun(job, outcome string, fireToStart, d time.Duration)
	// JobTakeover: a stale run of job was taken over.
	JobTakeover(job string)
	// OutboxPublish: a message of topic was published ("ok"), failed
	// and will be retried ("retry"), or was dead-lettered ("dead");
	// sinceCommit is from its commit (PostgreSQL with
	// track_commit_timestamp on) or its INSERT to the broker's ack, for
	// "ok" only.
	OutboxPublish(topic, outcome string, sinceCommit time.Duration)
	// Leadership: this process won election's term (leading true), or
	// that leadership ended (leading false: resigned, lost, or its
	// context ended).
	Leadership(election string, term int64, leading bool)
}

// Nop records nothing; embed it in a Recorder.
type Nop struct{}

func (Nop) Call(op, dialect, outcome string, d time.Duration)              {}
func (Nop) TxnRetry(dialect, reason string)                                {}
func (Nop) TxnCommitUnknown(dialect, resolved string)                      {}
func (Nop) LeaseRenewFailed(dialect string, lost bool)                     {}
func (Nop) JobRun(job, outcome string, fireToStart, d time.Duration)       {}
func (Nop) JobTakeover(job string)                                         {}
func (Nop) OutboxPublish(topic, outcome string, sinceCommit time.Duration) {}
func (Nop) Leadership(election string, term int64, leading bool)           {}

// Metered is what a driver implements when it carries a Recorder.
type Metered interface {
	Metrics() Recorder
}

// Of returns the Recorder of driver db, or Nop when it has none.
func Of(db any) Recorder {
	if m, ok := db.(Metered); ok {
		if r := m.Metrics(); r != nil {
			return r
		}
	}
	return Nop{}
}
