//go:build !bench

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newBenchCmd without the bench build tag: the benchmarks (plots, an
// embedded NATS server, peer libraries) stay out of the CLI users install.
func newBenchCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "bench",
		Short:              "Benchmarks (not in this build: make bench, or go install -tags bench …/cmd/sqlcoord)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return usageError{errors.New("bench: this sqlcoord was built without benchmarks; in a checkout run `make bench`, or install with `go install -tags bench github.com/sqlcoord/sqlcoord/cmd/sqlcoord@version`")}
		},
	}
}
