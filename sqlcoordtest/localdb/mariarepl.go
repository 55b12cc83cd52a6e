package localdb

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
)

// slaveStatus reads one column of SHOW SLAVE STATUS ("" when not a replica).
func slaveStatus(ctx context.Context, db *sql.DB, col string) (string, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil || !rows.Next() {
		return "", err
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", err
	}
	for i, c := range cols {
		if c == col {
			return string(vals[i]), nil
		}
	}
	return "", fmt.Errorf("localdb: SHOW SLAVE STATUS has no %s", col)
}

// StartMariaDBReplicating starts a throwaway MariaDB server with a binary
// log (ROW format, GTID strict mode) and server id id; readOnly starts it
// read_only, as a replica is; semiSync turns on semi-synchronous
// replication (a primary waits, AFTER_SYNC, for a replica's
// acknowledgement; a read-only replica sends them). Pair two with ReplicateFrom.
func StartMariaDBReplicating(ctx context.Context, id int, readOnly, semiSync bool) (*Server, error) {
	m, err := installMariaDB(ctx, "myrepl")
	if err != nil {
		return nil, err
	}
	extra := []string{"--log-bin=" + m.dir + "/binlog", "--binlog-format=ROW", "--gtid-strict-mode=ON",
		"--log-slave-updates=ON", "--server-id=" + strconv.Itoa(id), "--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1"}
	if readOnly {
		extra = append(extra, "--read-only=ON")
	}
	switch {
	case semiSync && readOnly: // a replica acknowledges; were it to wait for acknowledgements too, its own applier would
		extra = append(extra, "--rpl-semi-sync-slave-enabled=ON")
	case semiSync:
		extra = append(extra, "--rpl-semi-sync-master-enabled=ON", "--rpl-semi-sync-master-wait-point=AFTER_SYNC",
			"--rpl-semi-sync-master-timeout=60000")
	}
	return startOnFreePort(ctx, m.dir, func(port int) *Server { return m.server(port, extra) })
}

// ReplicateFrom makes s replicate, by GTID, from the primary reached at
// host:port (through a proxy, so the link can be stalled or cut).
func (s *Server) ReplicateFrom(ctx context.Context, host string, port int) error {
	db, err := s.Admin()
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range []string{
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", host, port),
		"START SLAVE",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("localdb: replicate: %s: %w", q, err)
		}
	}
	return nil
}

// CaughtUp waits until replica has applied everything s has written so
// far (by GTID).
func (s *Server) CaughtUp(ctx context.Context, replica *Server) error {
	p, err := s.Admin()
	if err != nil {
		return err
	}
	defer p.Close()
	r, err := replica.Admin()
	if err != nil {
		return err
	}
	defer r.Close()
	var pos string
	if err := p.QueryRowContext(ctx, `SELECT @@gtid_binlog_pos`).Scan(&pos); err != nil {
		return err
	}
	var res int
	if err := r.QueryRowContext(ctx, `SELECT MASTER_GTID_WAIT(?, 30)`, pos).Scan(&res); err != nil || res != 0 {
		return fmt.Errorf("localdb: replica did not reach %s within 30s: %v", pos, err)
	}
	return nil
}

// PromoteReplica turns a replica into a primary the way a failover tool
// (MaxScale, Orchestrator) does: apply what it received, stop
// replicating, forget the primary, take writes.
func (s *Server) PromoteReplica(ctx context.Context) error {
	db, err := s.Admin()
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
		return fmt.Errorf("localdb: promote: %w", err)
	}
	io, err := slaveStatus(ctx, db, "Gtid_IO_Pos")
	if err != nil {
		return err
	}
	if io != "" {
		var res int
		if err := db.QueryRowContext(ctx, `SELECT MASTER_GTID_WAIT(?, 30)`, io).Scan(&res); err != nil || res != 0 {
			return fmt.Errorf("localdb: promote: relay log not applied up to %s within 30s: %v", io, err)
		}
	}
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("localdb: promote: %s: %w", q, err)
		}
	}
	return nil
}
