package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
)

// doctorReport is what `sqlcoord doctor` found; --json prints it as is.
type doctorReport struct {
	Database  string              `json:"database"`
	Server    sqlcoord.ServerInfo `json:"server"`
	Schema    *sqlcoord.Status    `json:"schema,omitempty"`
	SchemaErr string              `json:"schema_error,omitempty"`
	Listen    string              `json:"listen,omitempty"` // PostgreSQL: delivered, lost, or why not tested
	// LockProtocol (PostgreSQL, schema 15+): "advisory", "advisory+id" or "dual" (row
	// locks too, for instances older than schema 14).
	LockProtocol string            `json:"lock_protocol,omitempty"`
	Forks        []sqlcoord.Fork   `json:"forks,omitempty"`
	Guarantees   []doctorGuarantee `json:"guarantees"`
	// Untested names what this server is that sqlcoord's tests never ran
	// on (MySQL 8: Debian ships no MySQL 8 server).
	Untested string `json:"untested,omitempty"`
}

type doctorGuarantee struct {
	Holds bool   `json:"holds"`
	What  string `json:"what"`
	Why   string `json:"why"`
}

func newDoctorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Show what sqlcoord detects about the database (role, replication, schema, LISTEN through poolers) and which guarantees hold there",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dsn := dsnFrom(cmd)
			if dsn == "" {
				return usageError{errors.New("no database: pass --dsn or set SQLCOORD_DSN")}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{AllowReadOnly: true, MaxOpenConns: 4})
			if err != nil {
				return err
			}
			defer db.Close()
			rep := doctor(ctx, db)
			if done, err := printJSON(cmd, rep); done || err != nil {
				return err
			}
			printDoctor(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	return cmd
}

func doctor(ctx context.Context, db *sqlcoord.DB) doctorReport {
	rep := doctorReport{Database: db.String()}
	info, err := sqlcoord.Inspect(ctx, db)
	if err != nil {
		info.Detail = "inspect failed: " + err.Error()
	}
	rep.Server = info
	if st, err := sqlcoord.MigrationStatus(ctx, db); err != nil {
		rep.SchemaErr = err.Error()
	} else {
		rep.Schema = &st
	}
	if db.CanListen() == nil && !info.ReadOnly {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.Listen(lctx, "sqlcoord_doctor", sqlcoord.ListenOptions{ProbeOnly: true, ProbeTimeout: 2 * time.Second}, func() {})
		cancel()
		switch {
		case err == nil:
			rep.Listen = "delivered (a NOTIFY from another connection arrived)"
		case errors.Is(err, sqlcoord.ErrNotificationLost):
			rep.Listen = "lost: a transaction-mode pooler (PgBouncer?) is between sqlcoord and PostgreSQL; relays will poll (give them --listen-dsn), and statements need default_query_exec_mode=exec"
		default:
			rep.Listen = "not tested: " + err.Error()
		}
	}
	if rep.Schema != nil && rep.Schema.Version >= 16 {
		rep.Forks, _ = sqlcoord.Forks(ctx, db)
	}
	if info.Dialect == "postgres" && rep.Schema != nil && rep.Schema.Version >= 15 {
		if mode, err := sqlcoord.LockProtocol(ctx, db); err == nil {
			rep.LockProtocol = string(mode)
		}
	}
	rep.Guarantees = guarantees(info)
	if info.Dialect == "mysql" {
		rep.Untested = mysql8Untested
	}
	return rep
}

func guarantees(info sqlcoord.ServerInfo) []doctorGuarantee {
	pg := info.Dialect == "postgres"
	g := []doctorGuarantee{{
		Holds: !info.ReadOnly,
		What:  "locks, leases, fences, keys, outbox and jobs are enforced by this server",
		Why:   map[bool]string{true: "it accepts writes", false: "it is a hot standby or a read-only replica: every helper fails with ErrReadOnly; connect to the primary"}[!info.ReadOnly],
	}, {
		Holds: info.Synchronous,
		What:  "a failover loses no acknowledged write (idempotency records, outbox messages, job completions)",
		Why:   info.Detail,
	}}
	switch {
	case !info.Galera:
		why := "each is floored by the failover epoch of the history that issues it; a promoted, recovered or restored server starts a new one (see `sqlcoord epoch`)"
		if !pg {
			why += "; a MariaDB/MySQL restore from a dump or snapshot keeps server_id and cannot be detected: run `sqlcoord epoch advance` after one"
		}
		g = append(g, doctorGuarantee{Holds: true,
			What: "fencing tokens, segment ranges and job attempts never go back across a failover, a split brain or a restore", Why: why})
	}
	switch {
	case info.Galera:
		g = append(g, doctorGuarantee{Holds: false,
			What: "row locks exclude holders on other nodes",
			Why:  "Galera takes SELECT … FOR UPDATE locks on the local node only: send every lock user to one node"})
	}
	return g
}

func printDoctor(w io.Writer, r doctorReport) {
	fmt.Fprintf(w, "database     %s\n", r.Database)
	fmt.Fprintf(w, "server       %s (%s)\n", r.Server.Version, r.Server.Dialect)
	if r.Untested != "" {
		fmt.Fprintf(w, "untested     %s\n", r.Untested)
	}
	role := "primary (accepts writes)"
	if r.Server.ReadOnly {
		role = "hot standby / read-only replica"
	}
	fmt.Fprintf(w, "role         %s\n", role)
	fmt.Fprintf(w, "replication  %s\n", r.Server.Detail)
	if r.Server.Dialect == "postgres" && r.Server.Timeline > 0 {
		fmt.Fprintf(w, "timeline     %d\n", r.Server.Timeline)
	}
	for _, f := range r.Forks {
		if f.Current {
			fmt.Fprintf(w, "epoch        base %d since %s (%s; history %s)\n", f.Base, f.FirstSeen.UTC().Format(time.DateTime), f.Reason, f.History)
		}
	}
	if r.Server.Galera {
		fmt.Fprintf(w, "galera       %d nodes\n", r.Server.GaleraNodes)
	}
	switch {
	case r.Schema != nil && r.Schema.Version == r.Schema.Latest && !r.Schema.Dirty:
		fmt.Fprintf(w, "schema       at version %d (latest)\n", r.Schema.Version)
	case r.Schema != nil:
		fmt.Fprintf(w, "schema       at version %d of %d (dirty %v): run `sqlcoord migrate up`\n", r.Schema.Version, r.Schema.Latest, r.Schema.Dirty)
	default:
		fmt.Fprintf(w, "schema       %s\n", r.SchemaErr)
	}
	if r.Listen != "" {
		fmt.Fprintf(w, "LISTEN       %s\n", r.Listen)
	}
	switch r.LockProtocol {
	case string(sqlcoord.LocksAdvisory):
		fmt.Fprintf(w, "locks        advisory locks on a hash of each name (nothing written)\n")
	case string(sqlcoord.LocksAdvisoryID):
		fmt.Fprintf(w, "locks        advisory+id: also each name's id lock, so instances of schema 14 are excluded too; once none runs: `sqlcoord locks protocol advisory`\n")
	case string(sqlcoord.LocksDual):
		fmt.Fprintf(w, "locks        dual: also row locks, so instances older than schema 14 are excluded too; once none runs: `sqlcoord locks protocol advisory`\n")
	}
	fmt.Fprintln(w, "guarantees")
	for _, g := range r.Guarantees {
		mark := "no "
		if g.Holds {
			mark = "yes"
		}
		fmt.Fprintf(w, "  [%s] %s\n        %s\n", mark, g.What, g.Why)
	}
}

// mysql8Untested is what doctor says on a MySQL (not MariaDB) server.
const mysql8Untested = "MySQL 8: sqlcoord's MySQL statements are written but have never run in its tests (Debian ships no MySQL 8 server); treat every guarantee here as unverified"
