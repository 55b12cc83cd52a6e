package localdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
)

// Disk snapshots of a local server's data directory, restored in place
// (same address, same system identifier / server id): what a cloud
// "restore from snapshot", an LVM or EBS snapshot, a copied data directory
// or a base backup started where the server was gives.

// How a snapshot is taken.
const (
	// SnapshotBaseBackup: pg_basebackup of the running server (PostgreSQL;
	// it starts with backup recovery).
	SnapshotBaseBackup = "basebackup"
	// SnapshotFrozen: every process of the server stopped (SIGSTOP), the
	// data directory copied, the processes continued: a crash-consistent
	// image, as a block-device snapshot takes it (the restored server runs
	// crash recovery).
	SnapshotFrozen = "frozen-copy"
	// SnapshotCold: the server shut down cleanly, the data directory
	// copied, the server started again (the restored server starts
	// without recovery).
	SnapshotCold = "cold-copy"
)

var snapshots atomic.Int64

// Snapshot takes a snapshot of the local server's data directory the way
// how says and returns where it is (for RestoreSnapshot).
func (s *Server) Snapshot(ctx context.Context, how string) (string, error) {
	if s.Source != "local" {
		return "", fmt.Errorf("localdb: a snapshot needs a local server (this one is %s)", s.Source)
	}
	dest := filepath.Join(s.dir, "snapshot-"+strconv.FormatInt(snapshots.Add(1), 10))
	data := filepath.Join(s.dir, "data")
	switch how {
	case SnapshotBaseBackup:
		if s.Family != "postgres" {
			return "", errors.New("localdb: pg_basebackup is for PostgreSQL")
		}
		return dest, s.baseBackupTo(ctx, dest)
	case SnapshotFrozen:
		pid := s.Pid()
		if pid == 0 {
			return "", errors.New("localdb: the server is not running")
		}
		if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
			return "", err
		}
		err := run(ctx, nil, s.dir, "/bin/cp", "-a", data, dest)
		syscall.Kill(-pid, syscall.SIGCONT)
		return dest, err
	case SnapshotCold:
		if err := s.Halt(); err != nil {
			return "", err
		}
		err := run(ctx, nil, s.dir, "/bin/cp", "-a", data, dest)
		if rerr := s.Resume(ctx); err == nil {
			err = rerr
		}
		return dest, err
	}
	return "", fmt.Errorf("localdb: unknown snapshot kind %q (want %s, %s or %s)", how, SnapshotBaseBackup, SnapshotFrozen, SnapshotCold)
}

// RestoreSnapshot kills the server (SIGKILL to every process, like a lost
// machine), puts the snapshot in place of its data directory and starts it
// again on the same port with the same arguments.
func (s *Server) RestoreSnapshot(ctx context.Context, snapshot string) error {
	s.Crash()
	data := filepath.Join(s.dir, "data")
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	if err := run(ctx, nil, s.dir, "/bin/cp", "-a", snapshot, data); err != nil {
		return err
	}
	return s.Resume(ctx)
}

// StartMariaDB starts a throwaway local MariaDB server of the caller's own
// (to kill and restore; environment servers are not used).
func StartMariaDB(ctx context.Context) (*Server, error) { return startLocalMariaDB(ctx) }
