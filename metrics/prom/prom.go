// Package prom records sqlcoord's metrics with Prometheus
// (client_golang): give New's Recorder to a driver (sqlcoord.Options.Metrics) and
// serve the registry.
//
//	sqlcoord_call_duration_seconds{op,dialect,outcome}   histogram, every helper call
//	sqlcoord_lock_wait_seconds{dialect,outcome}          histogram, lock.try and lock.wait
//	sqlcoord_txn_retries_total{dialect,reason}           counter
//	sqlcoord_txn_commit_unknown_total{dialect,resolved}  counter (committed, not_committed, unknown)
//	sqlcoord_lease_renew_failures_total{dialect}         counter, keep-alive renewals that failed
//	sqlcoord_lease_lost_total{dialect}                   counter, leases a keeper lost
//	sqlcoord_job_runs_total{job,outcome}                 counter (succeeded, failed, retry, dead, superseded, canceled); alert on dead
//	sqlcoord_job_failures_total{job}                     counter
//	sqlcoord_job_takeovers_total{job}                    counter
//	sqlcoord_job_fire_to_start_seconds{job}              histogram, planned fire time → claim
//	sqlcoord_job_run_duration_seconds{job,outcome}       histogram
//	sqlcoord_outbox_published_total{topic}               counter
//	sqlcoord_outbox_publish_failures_total{topic}        counter, attempts that failed (retried or dead)
//	sqlcoord_outbox_dead_total{topic}                    counter
//	sqlcoord_outbox_commit_to_publish_seconds{topic}     histogram, commit (or INSERT) → broker ack
//
// The outbox's pending and dead gauges are read from the table at scrape
// time: prom.NewOutboxCollector.
package prom

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlcoord/sqlcoord/metrics"
)

// Recorder is a metrics.Recorder backed by Prometheus collectors.
type Recorder struct {
	calls, lockWait, fireToStart, runDur, commitToPub *prometheus.HistogramVec
	retries, unknown, renewFail, lost                 *prometheus.CounterVec
	runs, failures, takeovers                         *prometheus.CounterVec
	published, pubFailed, dead                        *prometheus.CounterVec
	termsWon                                          *prometheus.CounterVec
	leading                                           *prometheus.GaugeVec
}

var _ metrics.Recorder = (*Recorder)(nil)

// New registers sqlcoord's collectors with reg and returns their
// Recorder. Registering twice on one registry (a relay and a driver
// sharing it) shares the collectors.
func New(reg prometheus.Registerer) (*Recorder, error) {
	lat := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	long := []float64{.01, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}
	h := func(name, help string, b []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b}, labels)
	}
	c := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	r := &Recorder{
		calls:       h("sqlcoord_call_duration_seconds", "Duration of sqlcoord helper calls.", lat, "op", "dialect", "outcome"),
		lockWait:    h("sqlcoord_lock_wait_seconds", "Time spent getting a lock (TryLock, Lock).", lat, "dialect", "outcome"),
		fireToStart: h("sqlcoord_job_fire_to_start_seconds", "From a slot's planned fire time to its run's claim.", lat, "job"),
		runDur:      h("sqlcoord_job_run_duration_seconds", "Duration of scheduled job runs.", long, "job", "outcome"),
		commitToPub: h("sqlcoord_outbox_commit_to_publish_seconds", "From a message's commit (PostgreSQL with track_commit_timestamp) or INSERT to the broker's ack.", lat, "topic"),
		retries:     c("sqlcoord_txn_retries_total", "txn.Do re-runs of the transaction function.", "dialect", "reason"),
		unknown:     c("sqlcoord_txn_commit_unknown_total", "COMMITs whose outcome was unknown, by how it was resolved.", "dialect", "resolved"),
		renewFail:   c("sqlcoord_lease_renew_failures_total", "Lease keep-alive renewals that failed.", "dialect"),
		lost:        c("sqlcoord_lease_lost_total", "Leases a keeper lost (taken over, or renewal failing until expiry).", "dialect"),
		runs:        c("sqlcoord_job_runs_total", "Scheduled job runs by outcome.", "job", "outcome"),
		failures:    c("sqlcoord_job_failures_total", "Scheduled job runs that failed.", "job"),
		takeovers:   c("sqlcoord_job_takeovers_total", "Stale or re-run slots claimed by takeover.", "job"),
		published:   c("sqlcoord_outbox_published_total", "Messages published and marked.", "topic"),
		pubFailed:   c("sqlcoord_outbox_publish_failures_total", "Failed publish attempts (retried or dead-lettered).", "topic"),
		dead:        c("sqlcoord_outbox_dead_total", "Messages dead-lettered.", "topic"),
		termsWon:    c("sqlcoord_election_terms_won_total", "Terms this process won, by election.", "election"),
		leading:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sqlcoord_election_leading", Help: "1 while this process leads the election, else 0."}, []string{"election"}),
	}
	var err error
	for _, p := range []*prometheus.HistogramVec{r.calls, r.lockWait, r.fireToStart, r.runDur, r.commitToPub} {
		if *p, err = register(reg, *p); err != nil {
			return nil, err
		}
	}
	for _, p := range []*prometheus.CounterVec{r.retries, r.unknown, r.renewFail, r.lost, r.runs, r.failures, r.takeovers, r.published, r.pubFailed, r.dead, r.termsWon} {
		if *p, err = register(reg, *p); err != nil {
			return nil, err
		}
	}
	if r.leading, err = register(reg, r.leading); err != nil {
		return nil, err
	}
	return r, nil
}

// register registers c, or returns the collector already registered
// under its name.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(T); ok {
				return old, nil
			}
		}
		return c, err
	}
	return c, nil
}

// Call implements metrics.Recorder.
func (r *Recorder) Call(op, dialect, outcome string, d time.Duration) {
	r.calls.WithLabelValues(op, dialect, outcome).Observe(d.Seconds())
	if op == "lock.try" || op == "lock.wait" {
		r.lockWait.WithLabelValues(dialect, outcome).Observe(d.Seconds())
	}
}

// TxnRetry implements metrics.Recorder.
func (r *Recorder) TxnRetry(dialect, reason string) { r.retries.WithLabelValues(dialect, reason).Inc() }

// TxnCommitUnknown implements metrics.Recorder.
func (r *Recorder) TxnCommitUnknown(dialect, resolved string) {
	r.unknown.WithLabelValues(dialect, resolved).Inc()
}

// Leadership implements metrics.Recorder.
func (r *Recorder) Leadership(election string, term int64, leading bool) {
	if leading {
		r.termsWon.WithLabelValues(election).Inc()
		r.leading.WithLabelValues(election).Set(1)
		return
	}
	r.leading.WithLabelValues(election).Set(0)
}

// LeaseRenewFailed implements metrics.Recorder.
func (r *Recorder) LeaseRenewFailed(dialect string, lost bool) {
	r.renewFail.WithLabelValues(dialect).Inc()
	if lost {
		r.lost.WithLabelValues(dialect).Inc()
	}
}

// JobRun implements metrics.Recorder.
func (r *Recorder) JobRun(job, outcome string, fireToStart, d time.Duration) {
	r.runs.WithLabelValues(job, outcome).Inc()
	if outcome == "failed" {
		r.failures.WithLabelValues(job).Inc()
	}
	r.fireToStart.WithLabelValues(job).Observe(max(fireToStart, 0).Seconds())
	r.runDur.WithLabelValues(job, outcome).Observe(d.Seconds())
}

// JobTakeover implements metrics.Recorder.
func (r *Recorder) JobTakeover(job string) { r.takeovers.WithLabelValues(job).Inc() }

// OutboxPublish implements metrics.Recorder.
func (r *Recorder) OutboxPublish(topic, outcome string, sinceCommit time.Duration) {
	switch outcome {
	case "ok":
		r.published.WithLabelValues(topic).Inc()
		r.commitToPub.WithLabelValues(topic).Observe(max(sinceCommit, 0).Seconds())
	case "dead":
		r.pubFailed.WithLabelValues(topic).Inc()
		r.dead.WithLabelValues(topic).Inc()
	default:
		r.pubFailed.WithLabelValues(topic).Inc()
	}
}
