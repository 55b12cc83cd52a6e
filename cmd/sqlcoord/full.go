//go:build full

package main

// The full build (go install -tags full …): Prometheus metrics on the
// relay's and the saga driver's --listen address, and the NATS and Kafka
// publishers. The default build leaves them out (and what they compile:
// client_golang, protobuf, nats.go, franz-go) to stay small.

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/metrics/prom"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/kafkapub"
	"github.com/sqlcoord/sqlcoord/outbox/natspub"
)

// buildTags are this build's tags (the tests build the binary alike).
const buildTags = "full"

// registry is the Prometheus registry of a metered command.
type registry struct{ *prometheus.Registry }

// openMetered opens the installed database for writing with a Prometheus
// recorder of every call it makes, and returns the recorder's registry.
func openMetered(cmd *cobra.Command) (*sqlcoord.DB, *registry, error) {
	reg := prometheus.NewRegistry()
	rec, err := prom.New(reg)
	if err != nil {
		return nil, nil, err
	}
	db, err := openInstalled(cmd, writes, sqlcoord.Options{Metrics: rec})
	if err != nil {
		return nil, nil, err
	}
	return db, &registry{reg}, nil
}

// relayCollectors adds the outbox's gauges and the process's own.
func (r *registry) relayCollectors(db *sqlcoord.DB) {
	r.MustRegister(prom.NewOutboxCollector(db), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

func (r *registry) handler() http.Handler {
	return promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{})
}

// brokerPublisher builds a nats:// or kafka:// publisher.
func brokerPublisher(spec string) (outbox.Publisher, func(), error) {
	if strings.HasPrefix(spec, "nats://") {
		return natspub.New(spec)
	}
	return kafkapub.New(strings.Split(strings.TrimPrefix(spec, "kafka://"), ","))
}
