package dialects

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNotSynchronous: the server acknowledges commits before a standby has
// them (asynchronous replication, or none), and the caller asked for
// synchronous replication (sqlcoord.Options.RequireSyncReplication).
var ErrNotSynchronous = errors.New("sqlcoord: commits are not synchronously replicated")

// ServerInfo is what a server says about itself and its replication.
type ServerInfo struct {
	Dialect  string `json:"dialect"` // postgres, mysql or mariadb
	Version  string `json:"version"`
	ReadOnly bool   `json:"read_only"` // a hot standby or a read-only replica

	// Replication. Synchronous: a commit is acknowledged only once a
	// standby has it (PostgreSQL synchronous_standby_names with a
	// connected sync standby and synchronous_commit on/remote_write/
	// remote_apply; MariaDB/MySQL semi-sync on with a connected replica;
	// Galera certification).
	Synchronous bool   `json:"synchronous"`
	Replicas    int    `json:"replicas"` // standbys/replicas connected to this server (as far as it shows)
	Detail      string `json:"detail"`   // the settings behind Synchronous, for people

	// PostgreSQL: the WAL timeline this server writes on; 0 on a standby
	// (and on MySQL/MariaDB). Failover epochs: see Forks.
	Timeline int64 `json:"timeline"`
	// MariaDB Galera (wsrep_on): the cluster's size.
	Galera      bool `json:"galera"`
	GaleraNodes int  `json:"galera_nodes"`
}

// Inspect asks the server about itself (see ServerInfo).
func (d *Dialect) Inspect(ctx context.Context, pool Executor) (ServerInfo, error) {
	info := ServerInfo{Dialect: d.name}
	if err := pool.QueryRow(ctx, d.q.Version).Scan(&info.Version); err != nil {
		return info, d.Classify(err)
	}
	if err := pool.QueryRow(ctx, d.q.ReadOnly).Scan(&info.ReadOnly); err != nil {
		return info, d.Classify(err)
	}
	if d.family == "postgres" {
		return inspectPostgres(ctx, pool, info)
	}
	return inspectMySQL(ctx, pool, info)
}

func inspectPostgres(ctx context.Context, pool Executor, info ServerInfo) (ServerInfo, error) {
	var names, commit string
	var standbys, syncs int
	var tl *int64
	err := pool.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit'),
  (SELECT count(*) FROM pg_stat_replication)::int,
  (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))::int,
  CASE WHEN pg_is_in_recovery() THEN NULL ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END`).
		Scan(&names, &commit, &standbys, &syncs, &tl)
	if err != nil {
		return info, Postgres.Classify(err)
	}
	if tl != nil {
		info.Timeline = *tl
	}
	if info.ReadOnly {
		// A standby: its own pg_stat_replication lists only cascading
		// standbys, and the synchronous settings it shows are the
		// primary's to apply. Say what it replicates from instead.
		var status, sender string
		err := pool.QueryRow(ctx, `SELECT coalesce((SELECT status FROM pg_stat_wal_receiver LIMIT 1), 'not receiving'),
  coalesce((SELECT sender_host || ':' || sender_port FROM pg_stat_wal_receiver LIMIT 1), '')`).Scan(&status, &sender)
		if err != nil {
			return info, Postgres.Classify(err)
		}
		info.Replicas = standbys
		info.Detail = fmt.Sprintf("a standby: WAL receiver %s", status)
		if sender != "" {
			info.Detail += " from " + sender
		}
		info.Detail += fmt.Sprintf("; %d cascading standby(s); what a failover loses is decided on the primary (run doctor there)", standbys)
		return info, nil
	}
	info.Replicas = standbys
	info.Synchronous = names != "" && syncs > 0 && (commit == "on" || commit == "remote_write" || commit == "remote_apply")
	info.Detail = fmt.Sprintf("synchronous_standby_names=%q synchronous_commit=%s, %d standby(s) streaming, %d synchronous", names, commit, standbys, syncs)
	return info, nil
}

func inspectMySQL(ctx context.Context, pool Executor, info ServerInfo) (ServerInfo, error) {
	vars := map[string]string{}
	for _, q := range []string{
		`SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'rpl_semi_sync_master_enabled', 'rpl_semi_sync_source_enabled', 'rpl_semi_sync_master_wait_point', 'rpl_semi_sync_source_wait_point')`,
		`SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', 'wsrep_ready', 'Rpl_semi_sync_master_clients', 'Rpl_semi_sync_source_clients', 'Rpl_semi_sync_master_status', 'Rpl_semi_sync_source_status')`,
	} {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			return info, MySQL.Classify(err)
		}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return info, err
			}
			vars[strings.ToLower(k)] = v
		}
		rows.Close()
	}
	on := func(k string) bool { v := strings.ToUpper(vars[k]); return v == "ON" || v == "1" }
	info.Galera = on("wsrep_on")
	info.GaleraNodes, _ = strconv.Atoi(vars["wsrep_cluster_size"])
	semi := (on("rpl_semi_sync_master_enabled") && on("rpl_semi_sync_master_status")) ||
		(on("rpl_semi_sync_source_enabled") && on("rpl_semi_sync_source_status"))
	clients, _ := strconv.Atoi(vars["rpl_semi_sync_master_clients"] + vars["rpl_semi_sync_source_clients"])
	info.Replicas = clients
	switch {
	case info.Galera:
		info.Synchronous = on("wsrep_ready") && info.GaleraNodes > 1
		info.Detail = fmt.Sprintf("Galera: wsrep_on, cluster size %d, ready %s", info.GaleraNodes, vars["wsrep_ready"])
	case semi:
		wait := vars["rpl_semi_sync_master_wait_point"] + vars["rpl_semi_sync_source_wait_point"]
		info.Synchronous = clients > 0 && strings.EqualFold(wait, "AFTER_SYNC")
		info.Detail = fmt.Sprintf("semi-synchronous replication on, wait point %s, %d semi-sync replica(s)", wait, clients)
	default:
		info.Detail = "no semi-synchronous replication and no Galera: replicas (if any) are asynchronous"
	}
	return info, nil
}
