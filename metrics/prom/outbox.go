package prom

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
)

// OutboxCollector exports the outbox's gauges, read from the table when
// Prometheus scrapes (one statement, bounded by a 5 s timeout):
//
//	sqlcoord_outbox_pending              messages waiting to be published
//	sqlcoord_outbox_dead                 dead-lettered messages
//	sqlcoord_outbox_lag_seconds          age of the oldest pending message
//	sqlcoord_outbox_failing              pending messages whose last publish failed
//	sqlcoord_outbox_stats_up             1 when the last read succeeded
type OutboxCollector struct {
	db                              sqlcoord.Base
	pending, dead, lag, failing, up *prometheus.Desc
}

// NewOutboxCollector returns the outbox gauges of db; register it once per
// database.
func NewOutboxCollector(db sqlcoord.Base) *OutboxCollector {
	return &OutboxCollector{db: db,
		pending: prometheus.NewDesc("sqlcoord_outbox_pending", "Messages waiting to be published.", nil, nil),
		dead:    prometheus.NewDesc("sqlcoord_outbox_dead", "Dead-lettered messages.", nil, nil),
		lag:     prometheus.NewDesc("sqlcoord_outbox_lag_seconds", "Age of the oldest pending message.", nil, nil),
		failing: prometheus.NewDesc("sqlcoord_outbox_failing", "Pending messages whose last publish failed (a stuck streaming head shows here).", nil, nil),
		up:      prometheus.NewDesc("sqlcoord_outbox_stats_up", "1 when the outbox statistics could be read.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *OutboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.dead
	ch <- c.lag
	ch <- c.failing
	ch <- c.up
}

// Collect implements prometheus.Collector.
func (c *OutboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := outbox.NewAdmin(c.db).Stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(st.Dead))
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, st.Lag.Seconds())
	ch <- prometheus.MustNewConstMetric(c.failing, prometheus.GaugeValue, float64(st.Failing))
}
