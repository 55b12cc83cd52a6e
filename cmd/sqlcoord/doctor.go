package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/outbox"
)

// doctorReport is what `sqlcoord doctor` found; --json prints it as is.
// A fact doctor could not read is null (or absent) here, never a guess,
// and its error is in Unread.
type doctorReport struct {
	Database string               `json:"database"`
	Server   *sqlcoord.ServerInfo `json:"server"` // null: could not be read (see unread)
	Schema   *sqlcoord.Status     `json:"schema"` // null: could not be read
	// Listen (PostgreSQL primary): delivered, lost, or why not tested.
	Listen string `json:"listen,omitempty"`
	// LockProtocol (PostgreSQL, schema 15+): "advisory", "advisory+id" or
	// "dual".
	LockProtocol string `json:"lock_protocol,omitempty"`
	// Slots (PostgreSQL): the streaming relays' replication slots of this
	// database and the WAL each retains.
	Slots      []outbox.Slot     `json:"slots,omitempty"`
	Forks      []sqlcoord.Fork   `json:"forks"`
	Guarantees []doctorGuarantee `json:"guarantees"`
	// Untested names what this server is that sqlcoord's tests never ran
	// on (MySQL 8: Debian ships no MySQL 8 server).
	Untested string       `json:"untested,omitempty"`
	Unread   []doctorFact `json:"unread"`    // facts that could not be read, and why
	ExitCode int          `json:"exit_code"` // what doctor exits with (docs/cli.md)
}

// unread: fact is listed under Unread.
func (r doctorReport) unread(fact string) bool {
	return slices.ContainsFunc(r.Unread, func(f doctorFact) bool { return f.Fact == fact })
}

// doctorFact is a fact doctor could not read.
type doctorFact struct {
	Fact  string `json:"fact"`
	Error string `json:"error"`
}

// Guarantee statuses.
const (
	holds   = "holds"
	fails   = "fails"
	unknown = "unknown" // the facts it depends on could not be read
)

type doctorGuarantee struct {
	Name     string `json:"name"`   // what --require names it
	Status   string `json:"status"` // holds, fails or unknown
	Required bool   `json:"required"`
	What     string `json:"what"`
	Why      string `json:"why"`
}

// requirable are the guarantees --require can add to the ones doctor
// always requires (writes, schema).
var requirable = []string{"sync", "listen", "epochs", "galera-locks", "slots"}

func newDoctorCmd() *cobra.Command {
	var require []string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Show what sqlcoord detects about the database and which guarantees hold there; exit 0 only when every required one does",
		Long: `Shows the server's role, replication, schema, failover epochs, LISTEN through poolers, and which
of sqlcoord's guarantees hold there. Exit status:
  0  every fact was read and every required guarantee holds
  3  some fact could not be read (printed as "unknown", never guessed); no required guarantee fails
  4  a required guarantee fails
Always required: writes (the server accepts writes: a hot standby enforces nothing) and schema (installed,
current, not dirty). --require adds: sync (a failover loses no acknowledged write), listen (NOTIFY reaches
relays), epochs (counters never go back across a failover), galera-locks (row locks are cluster-wide),
slots (no streaming relay's replication slot keeps WAL with no relay attached).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, r := range require {
				if !slices.Contains(requirable, r) {
					return usageError{fmt.Errorf("--require %q: want %s", r, strings.Join(requirable, ", "))}
				}
			}
			dsn := dsnFrom(cmd)
			if dsn == "" {
				return usageError{errors.New("no database: pass --dsn or set SQLCOORD_DSN")}
			}
			o, err := dbOptions(cmd, reads, sqlcoord.Options{MaxOpenConns: 4})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			db, err := sqlcoord.Open(ctx, dsn, o)
			if err != nil {
				return err
			}
			defer db.Close()
			rep := doctor(ctx, db, require)
			if done, err := printJSON(cmd, rep); err != nil {
				return err
			} else if !done {
				printDoctor(cmd.OutOrStdout(), rep)
			}
			if rep.ExitCode != exitOK {
				return exitError{rep.ExitCode, doctorVerdict(rep)}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&require, "require", nil, "also require these guarantees: "+strings.Join(requirable, ", "))
	return cmd
}

// doctorVerdict is the one-line error doctor exits non-zero with.
func doctorVerdict(r doctorReport) error {
	var failed, unread []string
	for _, g := range r.Guarantees {
		if g.Required && g.Status == fails {
			failed = append(failed, g.Name)
		}
	}
	for _, f := range r.Unread {
		unread = append(unread, f.Fact)
	}
	if len(failed) > 0 {
		return fmt.Errorf("doctor: required guarantee(s) fail: %s", strings.Join(failed, ", "))
	}
	return fmt.Errorf("doctor: could not read: %s", strings.Join(unread, ", "))
}

func doctor(ctx context.Context, db *sqlcoord.DB, require []string) doctorReport {
	rep := doctorReport{Database: db.String(), Forks: []sqlcoord.Fork{}, Unread: []doctorFact{}}
	unread := func(fact string, err error) {
		rep.Unread = append(rep.Unread, doctorFact{fact, redact.Text(err.Error())})
	}
	if info, err := sqlcoord.Inspect(ctx, db); err != nil {
		unread("server", err)
	} else {
		rep.Server = &info
	}
	if st, err := sqlcoord.MigrationStatus(ctx, db); err != nil {
		unread("schema", err)
	} else {
		rep.Schema = &st
	}
	pg := db.Dialect().Family() == "postgres"
	primaryPG := rep.Server != nil && pg && !rep.Server.ReadOnly
	notRead := func(fact, why string) { unread(fact, errors.New("not read: "+why)) }
	canListen := db.CanListen()
	switch {
	case pg && rep.Server == nil:
		notRead("listen", "the server could not be inspected")
	case pg && rep.Server.ReadOnly:
		rep.Listen = "not tested: a standby (NOTIFY is sent and received on the primary; relays connect there)"
	case primaryPG && canListen != nil:
		unread("listen", canListen)
	}
	if primaryPG && canListen == nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.Listen(lctx, "sqlcoord_doctor", sqlcoord.ListenOptions{ProbeOnly: true, ProbeTimeout: 2 * time.Second}, func() {})
		cancel()
		switch {
		case err == nil:
			rep.Listen = "delivered (a NOTIFY from another connection arrived)"
		case errors.Is(err, sqlcoord.ErrNotificationLost):
			rep.Listen = "lost: a transaction-mode pooler (PgBouncer?) is between sqlcoord and PostgreSQL; relays will poll (give them --listen-dsn)"
		default:
			unread("listen", err)
		}
	}
	if rep.Schema == nil {
		notRead("forks", "the schema version could not be read")
		if primaryPG {
			notRead("lock protocol", "the schema version could not be read")
		}
	}
	if rep.Schema != nil && rep.Schema.Version >= 16 {
		if forks, err := sqlcoord.Forks(ctx, db); err != nil {
			unread("forks", err)
		} else {
			rep.Forks = forks
		}
	}
	if primaryPG && rep.Schema != nil && rep.Schema.Version >= 15 {
		if mode, err := sqlcoord.LockProtocol(ctx, db); err != nil {
			unread("lock protocol", err)
		} else {
			rep.LockProtocol = string(mode)
		}
	}
	if rep.Server != nil && rep.Server.Dialect == "postgres" {
		if slots, err := outbox.Slots(ctx, db); err != nil {
			unread("slots", err)
		} else {
			rep.Slots = slots
		}
	}
	rep.Guarantees = guarantees(rep)
	// a requirement this server cannot meet is refused, never ignored
	for _, name := range require {
		if slices.ContainsFunc(rep.Guarantees, func(g doctorGuarantee) bool { return g.Name == name }) {
			continue
		}
		g := doctorGuarantee{Name: name, Status: fails, What: name + " (required)"}
		switch {
		case rep.Server == nil:
			g.Status, g.Why = unknown, "the server could not be inspected"
		case name == "slots":
			g.Status, g.What, g.Why = holds, "no streaming relay's replication slot keeps WAL with no relay attached", "no replication slot"
		case name == "galera-locks":
			g.Status, g.What, g.Why = holds, "row locks exclude holders on other nodes", "not a Galera cluster: a lock is the server's own"
		case name == "listen":
			g.What = "NOTIFY reaches relays and watchers (no polling delay)"
			g.Why = fmt.Sprintf("%s has no LISTEN/NOTIFY: relays poll, waiters are woken by KILL QUERY of their own sleeping connection", rep.Server.Dialect)
			if rep.Server.ReadOnly {
				g.Why = "a read-only server: LISTEN was not tested"
			}
		default:
			g.Why = fmt.Sprintf("not available on %s", rep.Server.Dialect)
		}
		rep.Guarantees = append(rep.Guarantees, g)
	}
	for i := range rep.Guarantees {
		g := &rep.Guarantees[i]
		g.Required = g.Name == "writes" || g.Name == "schema" || slices.Contains(require, g.Name)
	}
	if rep.Server != nil && rep.Server.Dialect == "mysql" {
		rep.Untested = mysql8Untested
	}
	rep.ExitCode = exitOK
	for _, g := range rep.Guarantees {
		switch {
		case g.Required && g.Status == fails:
			rep.ExitCode = exitUnhealthy
		case g.Required && g.Status == unknown && rep.ExitCode == exitOK:
			rep.ExitCode = exitUnread
		}
	}
	if len(rep.Unread) > 0 && rep.ExitCode == exitOK {
		rep.ExitCode = exitUnread
	}
	if rep.Schema != nil && rep.Schema.Ahead && rep.ExitCode == exitOK {
		rep.ExitCode = exitAhead
	}
	return rep
}

func status(known, ok bool) string {
	switch {
	case !known:
		return unknown
	case ok:
		return holds
	}
	return fails
}

func guarantees(r doctorReport) []doctorGuarantee {
	info := r.Server
	known := info != nil
	if !known {
		info = &sqlcoord.ServerInfo{}
	}
	pg := info.Dialect == "postgres"
	why := func(ok bool, yes, no string) string {
		switch {
		case !known:
			return "the server could not be inspected"
		case ok:
			return yes
		}
		return no
	}
	g := []doctorGuarantee{{
		Name: "writes", Status: status(known, !info.ReadOnly),
		What: "locks, leases, fences, keys, outbox and jobs are enforced by this server",
		Why:  why(!info.ReadOnly, "it accepts writes", "it is a hot standby or a read-only replica: every helper fails with ErrReadOnly; connect to the primary"),
	}}
	schema := doctorGuarantee{Name: "schema", Status: unknown, What: "sqlcoord's schema is installed, current and not dirty", Why: "the schema version could not be read"}
	if st := r.Schema; st != nil {
		switch {
		case st.Dirty:
			schema.Status, schema.Why = fails, fmt.Sprintf("dirty at version %d: a migration failed half-way (see `sqlcoord migrate force --help`)", st.Version)
		case st.Version == 0:
			schema.Status, schema.Why = fails, "not installed: run `sqlcoord migrate up`"
		case st.Version < st.Latest:
			schema.Status, schema.Why = fails, fmt.Sprintf("at version %d of %d: run `sqlcoord migrate up`", st.Version, st.Latest)
		case st.Ahead:
			schema.Status, schema.Why = holds, fmt.Sprintf("at version %d, ahead of this binary's %d: a newer release migrated it; this binary works on it but cannot migrate it (exit %d)", st.Version, st.Latest, exitAhead)
		default:
			schema.Status, schema.Why = holds, fmt.Sprintf("at version %d (latest)", st.Version)
		}
	}
	g = append(g, schema, doctorGuarantee{
		Name: "sync", Status: status(known, info.Synchronous),
		What: "a failover loses no acknowledged write (idempotency records, outbox messages, job completions)",
		Why:  why(true, info.Detail, ""),
	})
	if known && pg && !info.ReadOnly {
		l := doctorGuarantee{Name: "listen", Status: unknown, What: "NOTIFY reaches relays and watchers (no polling delay)", Why: "LISTEN could not be tested"}
		switch {
		case strings.HasPrefix(r.Listen, "delivered"):
			l.Status, l.Why = holds, r.Listen
		case r.Listen != "":
			l.Status, l.Why = fails, r.Listen
		}
		g = append(g, l)
	}
	if len(r.Slots) > 0 {
		sg := doctorGuarantee{Name: "slots", Status: holds, What: "no streaming relay's replication slot keeps WAL with no relay attached",
			Why: fmt.Sprintf("%d slot(s), each attached or within %d MiB", len(r.Slots), slotLagLimit>>20)}
		for _, sl := range r.Slots {
			switch {
			case sl.WALStatus == "lost":
				sg.Status, sg.Why = fails, fmt.Sprintf("slot %s fell behind max_slot_wal_keep_size and is lost: its relay group's next streamer drops it, makes a new one and polls what is pending (start the group, or drop the slot with `sqlcoord relay drop-slot` if the group is retired)", sl.Name)
			case !sl.Active && sl.LagBytes > slotLagLimit:
				sg.Status, sg.Why = fails, fmt.Sprintf("slot %s has no relay attached and retains %d MiB of WAL: start its relay group, or drop the slot if the group is retired (`sqlcoord relay drop-slot --group …`)", sl.Name, sl.LagBytes>>20)
			}
		}
		g = append(g, sg)
	}
	switch {
	case !known:
		g = append(g, doctorGuarantee{Name: "epochs", Status: unknown,
			What: "fencing tokens, segment ranges and job attempts never go back across a failover, a split brain or a restore",
			Why:  "the server could not be inspected"})
	case !info.Galera && r.unread("forks"):
		g = append(g, doctorGuarantee{Name: "epochs", Status: unknown,
			What: "fencing tokens, segment ranges and job attempts never go back across a failover, a split brain or a restore",
			Why:  "the recorded epochs (coord_forks) could not be read"})
	case !info.Galera:
		w := "each is floored by the failover epoch of the history that issues it; a promoted, recovered, restarted or restored server (a disk snapshot cannot be told from a restart) starts a new one at its first counter statement (see `sqlcoord epoch`, docs/failover.md)"
		if !pg {
			w += "; a dump reloaded into the same running MariaDB/MySQL server is not detected: run `sqlcoord epoch advance` after one"
		}
		g = append(g, doctorGuarantee{Name: "epochs", Status: holds,
			What: "fencing tokens, segment ranges and job attempts never go back across a failover, a split brain or a restore", Why: w})
	default:
		g = append(g, doctorGuarantee{Name: "galera-locks", Status: fails,
			What: "row locks exclude holders on other nodes",
			Why:  "Galera takes SELECT … FOR UPDATE locks on the local node only: send every lock user to one node (Options.GaleraSingleWriter)"})
	}
	return g
}

func printDoctor(w io.Writer, r doctorReport) {
	fmt.Fprintf(w, "database     %s\n", r.Database)
	if s := r.Server; s != nil {
		fmt.Fprintf(w, "server       %s (%s)\n", s.Version, s.Dialect)
		if r.Untested != "" {
			fmt.Fprintf(w, "untested     %s\n", r.Untested)
		}
		role := "primary (accepts writes)"
		if s.ReadOnly {
			role = "hot standby / read-only replica"
		}
		fmt.Fprintf(w, "role         %s\n", role)
		fmt.Fprintf(w, "replication  %s\n", s.Detail)
		switch {
		case s.Dialect == "postgres" && s.Timeline > 0:
			fmt.Fprintf(w, "timeline     %d\n", s.Timeline)
		case s.Dialect == "postgres":
			fmt.Fprintf(w, "timeline     none here (a standby replays its primary's WAL and writes none)\n")
		}
		if s.Galera {
			fmt.Fprintf(w, "galera       %d nodes\n", s.GaleraNodes)
		}
	} else {
		fmt.Fprintf(w, "server       unknown (see below)\n")
	}
	current := false
	for _, f := range r.Forks {
		if f.Current {
			current = true
			fmt.Fprintf(w, "epoch        base %d since %s (%s; history %s)\n", f.Base, f.FirstSeen.UTC().Format(time.DateTime), f.Reason, f.History)
		}
	}
	if r.unread("forks") {
		fmt.Fprintf(w, "epoch        unknown (see below)\n")
	} else if !current && len(r.Forks) == 0 && r.Schema != nil && r.Schema.Version >= 16 {
		fmt.Fprintf(w, "epoch        none recorded yet: the first counter statement records one\n")
	}
	if !current && len(r.Forks) > 0 && r.Server != nil {
		switch last := r.Forks[len(r.Forks)-1]; {
		case r.Server.ReadOnly:
			fmt.Fprintf(w, "epoch        none here (a standby or read-only server issues nothing); the newest recorded is base %d since %s (history %s)\n",
				last.Base, last.FirstSeen.UTC().Format(time.DateTime), last.History)
		case !r.Server.Galera:
			fmt.Fprintf(w, "epoch        none recorded for this server as it runs now: it restarted, was restored from a snapshot or backup, or was promoted since the newest epoch (base %d) was recorded; its first counter statement starts a new one above every recorded base (or run `sqlcoord epoch advance`)\n",
				last.Base)
		}
	}
	switch st := r.Schema; {
	case st == nil:
		fmt.Fprintf(w, "schema       unknown (see below)\n")
	case st.Version == st.Latest && !st.Dirty:
		fmt.Fprintf(w, "schema       at version %d (latest)\n", st.Version)
	case st.Ahead && !st.Dirty:
		fmt.Fprintf(w, "schema       at version %d, AHEAD of this binary's %d: a newer release migrated it (a rolling deploy, or this binary was rolled back to); it works on it, but migrate with the newer release\n", st.Version, st.Latest)
	case st.Dirty:
		fmt.Fprintf(w, "schema       DIRTY at version %d of %d: see `sqlcoord migrate force --help`\n", st.Version, st.Latest)
	default:
		fmt.Fprintf(w, "schema       at version %d of %d: run `sqlcoord migrate up`\n", st.Version, st.Latest)
	}
	if r.Listen != "" {
		fmt.Fprintf(w, "LISTEN       %s\n", r.Listen)
	}
	for _, sl := range r.Slots {
		state := "no relay attached"
		if sl.Active {
			state = "streaming"
		}
		fmt.Fprintf(w, "slot         %s: %s, %s of WAL retained (%s)\n", sl.Name, state, mib(sl.LagBytes), sl.WALStatus)
	}
	switch r.LockProtocol {
	case string(sqlcoord.LocksAdvisory):
		fmt.Fprintf(w, "locks        advisory locks on a hash of each name (nothing written)\n")
	case string(sqlcoord.LocksAdvisoryID):
		fmt.Fprintf(w, "locks        advisory+id: also each name's id lock, so instances of schema 14 are excluded too; once none runs: `sqlcoord locks protocol advisory`\n")
	case string(sqlcoord.LocksDual):
		fmt.Fprintf(w, "locks        dual: also row locks, so instances older than schema 14 are excluded too; once none runs: `sqlcoord locks protocol advisory`\n")
	}
	fmt.Fprintln(w, "guarantees   (required ones marked *)")
	for _, g := range r.Guarantees {
		mark := map[string]string{holds: "yes", fails: "no ", unknown: " ? "}[g.Status]
		req := " "
		if g.Required {
			req = "*"
		}
		fmt.Fprintf(w, " %s[%s] %s\n        %s\n", req, mark, g.What, g.Why)
	}
	for _, f := range r.Unread {
		fmt.Fprintf(w, "unread       %s: %s\n", f.Fact, f.Error)
	}
	fmt.Fprintf(w, "verdict      %s (exit %d)\n", map[int]string{exitOK: "healthy: every fact read, every required guarantee holds",
		exitUnread: "incomplete: some facts could not be read", exitUnhealthy: "unhealthy: a required guarantee fails"}[r.ExitCode], r.ExitCode)
}

// mysql8Untested is what doctor says on a MySQL (not MariaDB) server.
const mysql8Untested = "MySQL 8: sqlcoord's MySQL statements are written but have never run in its tests (Debian ships no MySQL 8 server); treat every guarantee here as unverified"

// slotLagLimit is how much WAL an unattached slot may retain before
// doctor's "slots" guarantee fails.
const slotLagLimit = 256 << 20

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
