package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/metrics/prom"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// count sums the samples of one metric family whose labels include want
// (histograms: the sample count).
func count(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				n += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				n += float64(m.GetHistogram().GetSampleCount())
			case m.GetGauge() != nil:
				n += m.GetGauge().GetValue()
			}
		}
	}
	return n
}

// Metrics everywhere, with bounded labels, off unless a
// Recorder is set on the driver.
func TestMetrics(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.Open(t)
		dialect := db.Dialect().Name()
		reg := prometheus.NewRegistry()
		rec, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		c := coord.New(db)

		t.Run("off by default", func(t *testing.T) {
			if err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error { return c.TryLock(ctx, tx, "m-off") }); err != nil {
				t.Fatal(err)
			}
			if n := count(t, reg, "sqlcoord_call_duration_seconds", nil); n != 0 {
				t.Fatalf("recorded %v calls with no Recorder set", n)
			}
		})
		db = env.Open(t, sqlcoord.Options{Metrics: rec})
		c = coord.New(db)

		t.Run("lock wait time and call outcomes", func(t *testing.T) {
			if err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error { return c.TryLock(ctx, tx, "m-lock") }); err != nil {
				t.Fatal(err)
			}
			holder, _ := db.BeginTx(ctx, nil)
			defer holder.Rollback()
			if err := c.TryLock(ctx, holder, "m-lock"); err != nil {
				t.Fatal(err)
			}
			other := env.Open(t, sqlcoord.Options{Metrics: rec})
			tx2, _ := other.BeginTx(ctx, nil)
			err := coord.New(other).Lock(ctx, tx2, "m-lock", 1*time.Second)
			tx2.Rollback()
			if !errors.Is(err, sqlcoord.ErrLockTimeout) {
				t.Fatalf("Lock on a held name: %v", err)
			}
			if n := count(t, reg, "sqlcoord_lock_wait_seconds", map[string]string{"dialect": dialect, "outcome": "ok"}); n < 2 {
				t.Errorf("lock_wait ok samples %v, want ≥ 2", n)
			}
			if n := count(t, reg, "sqlcoord_lock_wait_seconds", map[string]string{"outcome": "timeout"}); n != 1 {
				t.Errorf("lock_wait timeout samples %v, want 1", n)
			}
			if n := count(t, reg, "sqlcoord_call_duration_seconds", map[string]string{"op": "txn.do", "outcome": "ok"}); n < 1 {
				t.Errorf("txn.do calls %v", n)
			}
		})
		t.Run("txn.Do retries by reason", func(t *testing.T) {
			tries := 0
			err := txn.Do(ctx, db, txn.Options{BaseBackoff: time.Millisecond}, func(ctx context.Context, tx *sql.Tx) error {
				if tries++; tries == 1 {
					return fmt.Errorf("simulated: %w", sqlcoord.ErrSerialization)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := count(t, reg, "sqlcoord_txn_retries_total", map[string]string{"dialect": dialect, "reason": "serialization"}); n != 1 {
				t.Errorf("retries %v, want 1", n)
			}
		})
		t.Run("lease renew failures and losses", func(t *testing.T) {
			l, err := c.Acquire(ctx, "m-lease", "me", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{Interval: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer k.Stop()
			// Someone else's token: the next renewal is refused.
			if _, err := db.Executor().Exec(ctx, "UPDATE coord_leases SET owner = 'thief', token = token + 1 WHERE name = 'm-lease'"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-k.Context().Done():
			case <-time.After(5 * time.Second):
				t.Fatal("keeper did not notice the loss")
			}
			if n := count(t, reg, "sqlcoord_lease_lost_total", map[string]string{"dialect": dialect}); n < 1 {
				t.Errorf("lease_lost %v", n)
			}
			if n := count(t, reg, "sqlcoord_lease_renew_failures_total", nil); n < 1 {
				t.Errorf("renew failures %v", n)
			}
		})
		t.Run("job runs, failures, fire-to-start", func(t *testing.T) {
			s := jobs.NewScheduler(db, jobs.Options{})
			calls := 0
			if err := s.Register(jobs.Job{Name: "m-job", Schedule: "* * * * * *", Run: func(ctx context.Context, info jobs.Info) error {
				calls++
				if calls%2 == 0 {
					return errors.New("boom")
				}
				return nil
			}}); err != nil {
				t.Fatal(err)
			}
			sctx, stop := context.WithTimeout(ctx, 3500*time.Millisecond)
			defer stop()
			s.Run(sctx)
			if n := count(t, reg, "sqlcoord_job_runs_total", map[string]string{"job": "m-job", "outcome": "succeeded"}); n < 1 {
				t.Errorf("succeeded runs %v", n)
			}
			if n := count(t, reg, "sqlcoord_job_failures_total", map[string]string{"job": "m-job"}); n < 1 {
				t.Errorf("failures %v", n)
			}
			if n := count(t, reg, "sqlcoord_job_fire_to_start_seconds", map[string]string{"job": "m-job"}); n < 2 {
				t.Errorf("fire-to-start samples %v", n)
			}
		})
		t.Run("outbox publishes per topic and table gauges", func(t *testing.T) {
			ob := outbox.New(db)
			for _, topic := range []string{"m-ok", "m-ok", "m-bad"} {
				if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: topic, Payload: []byte("x")}); err != nil {
					t.Fatal(err)
				}
			}
			r, err := outbox.NewRelay(db, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
				if m.Topic == "m-bad" {
					return outbox.Permanent(errors.New("refused"))
				}
				return nil
			}), outbox.RelayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Once(ctx); err != nil {
				t.Fatal(err)
			}
			if n := count(t, reg, "sqlcoord_outbox_published_total", map[string]string{"topic": "m-ok"}); n != 2 {
				t.Errorf("published m-ok %v, want 2", n)
			}
			if n := count(t, reg, "sqlcoord_outbox_commit_to_publish_seconds", map[string]string{"topic": "m-ok"}); n != 2 {
				t.Errorf("commit_to_publish samples %v, want 2", n)
			}
			if n := count(t, reg, "sqlcoord_outbox_dead_total", map[string]string{"topic": "m-bad"}); n != 1 {
				t.Errorf("dead m-bad %v, want 1", n)
			}
			greg := prometheus.NewRegistry()
			greg.MustRegister(prom.NewOutboxCollector(db))
			if err := testutil.GatherAndCompare(greg, strings.NewReader(`# HELP sqlcoord_outbox_dead Dead-lettered messages.
# TYPE sqlcoord_outbox_dead gauge
sqlcoord_outbox_dead 1
# HELP sqlcoord_outbox_pending Messages waiting to be published.
# TYPE sqlcoord_outbox_pending gauge
sqlcoord_outbox_pending 0
`), "sqlcoord_outbox_dead", "sqlcoord_outbox_pending"); err != nil {
				t.Error(err)
			}
		})
		t.Run("labels stay bounded: no lock, lease or key names", func(t *testing.T) {
			mfs, _ := reg.Gather()
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					for _, lp := range m.GetLabel() {
						if strings.HasPrefix(lp.GetValue(), "m-lock") || strings.HasPrefix(lp.GetValue(), "m-lease") {
							t.Errorf("%s carries a name label %s=%s", mf.GetName(), lp.GetName(), lp.GetValue())
						}
					}
				}
			}
		})
	})
}

// With PostgreSQL's track_commit_timestamp on, commit→publish counts from
// the business transaction's commit, not from its INSERT: a message
// inserted, then committed 1.5 s later, is published well under 1.5 s
// after its commit.
func TestCommitToPublishFromCommit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	rec, _ := prom.New(reg)
	db := dbtest.PrivatePostgres(t, "commit_ts", sqlcoord.Options{Metrics: rec}, "-c", "track_commit_timestamp=on", "-c", "shared_buffers=32MB")
	ob := outbox.New(db)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Enqueue(ctx, tx, outbox.Msg{Topic: "late-commit", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the business transaction goes on
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(db, outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil }), outbox.RelayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Once(ctx); err != nil || n != 1 {
		t.Fatalf("once: %d %v", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "sqlcoord_outbox_commit_to_publish_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() >= 1.0 {
				t.Fatalf("commit→publish %v s over %d samples: measured from the INSERT, not the commit", h.GetSampleSum(), h.GetSampleCount())
			}
			return
		}
	}
	t.Fatal("no commit_to_publish histogram")
}
