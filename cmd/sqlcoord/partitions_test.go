package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestPartitionsCLI(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		if env.DB.Dialect().Partitioner() == nil {
			t.Skip("no partitioner")
		}
		t.Run("status of a plain outbox", func(t *testing.T) {
			out, err := runCLI(t, "partitions", "status", "--json", "--dsn", env.DSN)
			if err != nil || !strings.Contains(out, `"partitioned": false`) {
				t.Fatalf("status: %v\n%s", err, out)
			}
		})
		t.Run("enable, status, roll", func(t *testing.T) {
			if out, err := runCLI(t, "partitions", "enable", "--size", "1000", "--dsn", env.DSN); err != nil {
				t.Fatalf("enable: %v\n%s", err, out)
			}
			out, err := runCLI(t, "partitions", "status", "--json", "--dsn", env.DSN)
			var st struct {
				Partitioned bool
				Partitions  []struct {
					Name     string
					CatchAll bool `json:"catch_all"`
				}
			}
			if err != nil || json.Unmarshal([]byte(out), &st) != nil || !st.Partitioned || len(st.Partitions) < 4 || !st.Partitions[len(st.Partitions)-1].CatchAll {
				t.Fatalf("status after enable: %v\n%s", err, out)
			}
			out, err = runCLI(t, "partitions", "roll", "--older-than", "1h", "--dsn", env.DSN)
			if err != nil || !strings.Contains(out, "made ahead") {
				t.Fatalf("roll: %v\n%s", err, out)
			}
		})
		t.Run("enable twice fails and changes nothing", func(t *testing.T) {
			out, err := runCLI(t, "partitions", "enable", "--dsn", env.DSN)
			if err == nil || !strings.Contains(err.Error()+out, "partitioned already") {
				t.Fatalf("second enable: %v\n%s", err, out)
			}
		})
	})
}

func TestPartitionsKeysCLI(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		if env.DB.Dialect().KeyPartitioner() == nil {
			t.Skip("no key partitioner")
		}
		t.Run("status of a plain table", func(t *testing.T) {
			out, err := runCLI(t, "partitions", "keys", "status", "--json", "--dsn", env.DSN)
			if err != nil || !strings.Contains(out, `"partitioned": false`) {
				t.Fatalf("status: %v\n%s", err, out)
			}
		})
		t.Run("enable, status, roll", func(t *testing.T) {
			if out, err := runCLI(t, "partitions", "keys", "enable", "--period", "1h", "--dsn", env.DSN); err != nil {
				t.Fatalf("enable: %v\n%s", err, out)
			}
			out, err := runCLI(t, "partitions", "keys", "status", "--json", "--dsn", env.DSN)
			var st struct {
				Partitioned bool
				Period      float64 `json:"period_seconds"`
				Partitions  []struct {
					Name     string
					CatchAll bool `json:"catch_all"`
				}
			}
			if err != nil || json.Unmarshal([]byte(out), &st) != nil || !st.Partitioned || st.Period != 3600 || len(st.Partitions) < 4 || !st.Partitions[len(st.Partitions)-1].CatchAll {
				t.Fatalf("status after enable: %v\n%s", err, out)
			}
			out, err = runCLI(t, "partitions", "keys", "roll", "--dsn", env.DSN)
			if err != nil || !strings.Contains(out, "made ahead") {
				t.Fatalf("roll: %v\n%s", err, out)
			}
		})
		t.Run("enable twice fails and changes nothing", func(t *testing.T) {
			out, err := runCLI(t, "partitions", "keys", "enable", "--period", "1h", "--dsn", env.DSN)
			if err == nil || !strings.Contains(err.Error()+out, "partitioned already") {
				t.Fatalf("second enable: %v\n%s", err, out)
			}
		})
	})
}
