//go:build !full

package main

// The default build: no Prometheus, NATS or Kafka (see full.go).

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
)

// installFull is how to get the full build.
const installFull = "go install -tags full github.com/sqlcoord/sqlcoord/cmd/sqlcoord@v" + sqlcoord.Version

// buildTags are this build's tags (the tests build the binary alike).
const buildTags = ""

// registry stands for the Prometheus registry the full build has.
type registry struct{}

func openMetered(cmd *cobra.Command) (*sqlcoord.DB, *registry, error) {
	db, err := openInstalled(cmd, writes, sqlcoord.Options{})
	return db, &registry{}, err
}

func (*registry) relayCollectors(*sqlcoord.DB) {}

// handler answers /metrics with 501 and how to get metrics.
func (*registry) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "this sqlcoord was built without Prometheus metrics: "+installFull, http.StatusNotImplemented)
	})
}

var errNotBuiltIn = errors.New("not in this build")

// brokerPublisher: NATS and Kafka are in the full build only.
func brokerPublisher(spec string) (outbox.Publisher, func(), error) {
	scheme, _, _ := strings.Cut(spec, "://")
	return nil, nil, usageError{fmt.Errorf("--publisher %s://…: %w (NATS and Kafka publishers are in the full build: %s)", scheme, errNotBuiltIn, installFull)}
}
