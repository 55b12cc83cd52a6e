package main

import (
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/metrics/prom"
)

// openMetered opens the installed database for writing with a Prometheus
// recorder of every call it makes, and returns the recorder's registry.
func openMetered(cmd *cobra.Command) (*sqlcoord.DB, *prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	rec, err := prom.New(reg)
	if err != nil {
		return nil, nil, err
	}
	db, err := openInstalled(cmd, writes, sqlcoord.Options{Metrics: rec})
	if err != nil {
		return nil, nil, err
	}
	return db, reg, nil
}

// serveMetrics serves reg's /metrics, and what more adds to the mux, on
// addr (loopbackDefault's form) until stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger, what string, more func(*http.ServeMux)) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if more != nil {
		more(mux)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	log.Info(what, "addr", ln.Addr().String())
	return func() { srv.Close() }, nil
}

// metricsAddr is loopbackDefault for an optional --listen: "" serves
// nothing; a bad address is a usage error.
func metricsAddr(listen string) (string, error) {
	if listen == "" {
		return "", nil
	}
	addr, err := loopbackDefault(listen)
	if err != nil {
		return "", usageError{err}
	}
	return addr, nil
}
