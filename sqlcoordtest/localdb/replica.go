package localdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"
)

// StartPostgres starts a throwaway local PostgreSQL server with extra
// server arguments after the defaults (they win), e.g. "-c",
// "synchronous_commit=on". Environment servers are not used: callers need
// a server of their own to kill and promote.
func StartPostgres(ctx context.Context, extra ...string) (*Server, error) {
	s, err := startLocalPostgresArgs(ctx, extra)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// StartStandby copies a base backup of a primary reached at host:port
// (typically through a proxy, so the replication link can be cut or
// stalled) and starts it as a hot standby streaming from there, on its own
// free port. extra are server arguments after the defaults.
func StartStandby(ctx context.Context, host string, port int, extra ...string) (*Server, error) {
	return startPostgresOn(ctx, "pgstandby", extra, "pg_basebackup", func(data string) []string {
		return []string{"-h", host, "-p", strconv.Itoa(port), "-U", "postgres", "-D", data, "-R", "-X", "stream", "--no-sync", "-c", "fast"}
	})
}

// Promote ends recovery on a standby and waits until it accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	db, err := s.Admin()
	if err != nil {
		return err
	}
	defer db.Close()
	var ok bool
	if err := db.QueryRowContext(ctx, `SELECT pg_promote(true, 60)`).Scan(&ok); err != nil {
		return fmt.Errorf("localdb: promote: %w", err)
	}
	if !ok {
		return errors.New("localdb: promote: not promoted within 60s")
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var rec bool
		if err := db.QueryRowContext(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec); err == nil && !rec {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("localdb: promote: still in recovery after 30s")
}

// Crash SIGKILLs the server's whole process group at once (the postmaster
// and every backend), like a machine losing power; its data stays.
func (s *Server) Crash() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}
