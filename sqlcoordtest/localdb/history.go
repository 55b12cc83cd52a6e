package localdb

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Forks of a PostgreSQL history for the failover-epoch tests: a WAL
// archive with a base backup and point-in-time recovery from it, and a
// logical dump restored into another cluster.

// StartArchiving starts a throwaway PostgreSQL server that archives every
// WAL segment to a directory of its own (ArchiveDir); extra are server
// arguments after the defaults.
func StartArchiving(ctx context.Context, extra ...string) (*Server, error) {
	s, err := startPostgresOn(ctx, "pgarchive", append([]string{"-c", "wal_level=replica", "-c", "archive_mode=on",
		"-c", "archive_timeout=0", "-c", "max_wal_senders=5"}, extra...), "initdb", func(data string) []string {
		return []string{"-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"}
	})
	if err != nil {
		return nil, err
	}
	// archive_command needs the directory, which exists only now: set it
	// and reload (archive_command is reloadable).
	if err := os.MkdirAll(s.ArchiveDir(), 0o700); err != nil {
		s.Stop()
		return nil, err
	}
	if s.cred != nil {
		os.Chown(s.ArchiveDir(), int(s.cred.Uid), int(s.cred.Gid))
	}
	db, err := s.Admin()
	if err != nil {
		s.Stop()
		return nil, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `ALTER SYSTEM SET archive_command = 'cp %p `+s.ArchiveDir()+`/%f'`); err != nil {
		s.Stop()
		return nil, err
	}
	if _, err := db.ExecContext(ctx, `SELECT pg_reload_conf()`); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// ArchiveDir is where an archiving server's WAL segments go.
func (s *Server) ArchiveDir() string { return filepath.Join(s.dir, "archive") }

// BaseBackup copies a base backup of the running server s into a fresh
// directory and returns it (for StartRecovered).
func (s *Server) BaseBackup(ctx context.Context) (string, error) {
	dest := filepath.Join(s.dir, "basebackup")
	return dest, s.baseBackupTo(ctx, dest)
}

// baseBackupTo runs pg_basebackup of s into dest.
func (s *Server) baseBackupTo(ctx context.Context, dest string) error {
	bin, err := findPgBin()
	if err != nil {
		return err
	}
	return run(ctx, s.cred, s.dir, filepath.Join(bin, "pg_basebackup"), "-h", s.Host, "-p", strconv.Itoa(s.Port),
		"-U", "postgres", "-D", dest, "-X", "stream", "--no-sync", "-c", "fast")
}

// StartRecovered starts a new server from the base backup of from,
// replaying from's WAL archive up to the restore point target (created
// with pg_create_restore_point) and then promoting: point-in-time
// recovery, which starts a new timeline on the same system identifier.
func StartRecovered(ctx context.Context, from *Server, backup, target string) (*Server, error) {
	return startPostgresOn(ctx, "pgpitr", []string{
		"-c", "restore_command=cp " + from.ArchiveDir() + "/%f %p",
		"-c", "recovery_target_name=" + target,
		"-c", "recovery_target_action=promote",
	}, "/bin/cp", func(data string) []string {
		return []string{"-a", backup, data}
	})
}

// Dump writes a logical backup of database name (pg_dump, custom format)
// into the server's directory and returns the file.
func (s *Server) Dump(ctx context.Context, name string) (string, error) {
	bin, err := findPgBin()
	if err != nil {
		return "", err
	}
	dump := filepath.Join(s.dir, name+".dump")
	if err := run(ctx, s.cred, s.dir, filepath.Join(bin, "pg_dump"), "-h", s.Host, "-p", strconv.Itoa(s.Port), "-U", "postgres",
		"-Fc", "-f", dump, name); err != nil {
		return "", err
	}
	return dump, nil
}

// Restore creates database name on to and restores dump (from Dump on s)
// into it: a logical backup restored into another cluster, which has
// another system identifier.
func (s *Server) Restore(ctx context.Context, dump, name string, to *Server) error {
	bin, err := findPgBin()
	if err != nil {
		return err
	}
	if _, err := to.CreateDatabase(ctx, name); err != nil {
		return err
	}
	if err := run(ctx, s.cred, s.dir, filepath.Join(bin, "pg_restore"), "-h", to.Host, "-p", strconv.Itoa(to.Port), "-U", "postgres",
		"-d", name, "--no-owner", dump); err != nil {
		return fmt.Errorf("localdb: restore: %w", err)
	}
	return nil
}
