package main

import (
	"log/slog"
	"net"
	"net/http"
	"time"
)

// serveMetrics serves reg's /metrics, and what more adds to the mux, on
// addr (loopbackDefault's form) until stop is called.
func serveMetrics(addr string, reg *registry, log *slog.Logger, what string, more func(*http.ServeMux)) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", reg.handler())
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
