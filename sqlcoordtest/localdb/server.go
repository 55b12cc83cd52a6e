// Package localdb provisions real PostgreSQL and MariaDB/MySQL servers for
// sqlcoord's tests (through sqlcoordtest/dbtest), demo and benchmarks. It does
// not import testing, so the CLI can link it.
//
// Where a server comes from, in order:
//  1. SQLCOORD_PG_DSN / SQLCOORD_MYSQL_DSN: an existing server (the DSN's
//     user must be allowed to create databases);
//  2. local binaries (PostgreSQL initdb/postgres, MariaDB
//     mariadb-install-db/mariadbd): a throwaway server in a temporary
//     directory on a free loopback port, run as the postgres/mysql user when
//     the process is root, killed with its parent (PR_SET_PDEATHSIG);
//     SQLCOORD_PG_ARGS / SQLCOORD_MYSQL_ARGS (space-separated) are appended
//     to its command line and override the defaults, e.g.
//     SQLCOORD_MYSQL_ARGS=--innodb-buffer-pool-size=32M;
//  3. Fallback, when set (sqlcoordtest/dbtest sets it to a Docker daemon
//     through testcontainers-go, which the CLI does not link);
//  4. otherwise an error that says what to install (`make setup`).
package localdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// Families lists the dialect families the harness provides.
var Families = []string{"postgres", "mysql"}

// Server is one running database server.
type Server struct {
	Family string // "postgres" or "mysql"
	Source string // "env", "local" or "docker"
	Host   string
	Port   int

	adminDSN string // DSN of the maintenance database, driver form
	dir      string // temp dir for local servers
	bin      string // server binary for local servers
	args     []string
	stopSig  syscall.Signal // fast shutdown, when not the family's
	cred     *syscall.Credential
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	stopFn   func() error // docker
}

// DSN returns a driver DSN (postgres:// URL or go-sql-driver form) for the
// named database on this server.
func (s *Server) DSN(database string) string {
	if s.Family == "postgres" {
		u, _ := url.Parse(s.adminDSN)
		u.Path = "/" + database
		return u.String()
	}
	cfg, _ := mysql.ParseDSN(s.adminDSN)
	cfg.DBName = database
	return cfg.FormatDSN()
}

// Admin opens the maintenance connection (postgres database / no database).
func (s *Server) Admin() (*sql.DB, error) {
	drv := "pgx"
	if s.Family == "mysql" {
		drv = "mysql"
	}
	return sql.Open(drv, s.adminDSN)
}

// CreateDatabase creates a fresh, empty database and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	db, err := s.Admin()
	if err != nil {
		return "", err
	}
	defer db.Close()
	q := `CREATE DATABASE "` + name + `"`
	if s.Family == "mysql" {
		q = "CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return "", fmt.Errorf("localdb: create database %s on %s: %w", name, s.Family, err)
	}
	return s.DSN(name), nil
}

// CloneDatabase creates database name as a copy of template (schema and
// rows) and returns its DSN: PostgreSQL copies it as a template
// (CREATE DATABASE … TEMPLATE; nobody may be connected to template),
// MySQL/MariaDB table by table (CREATE TABLE … LIKE, INSERT … SELECT).
func (s *Server) CloneDatabase(ctx context.Context, template, name string) (string, error) {
	db, err := s.Admin()
	if err != nil {
		return "", err
	}
	defer db.Close()
	if s.Family == "postgres" {
		if _, err := db.ExecContext(ctx, `CREATE DATABASE "`+name+`" TEMPLATE "`+template+`"`); err != nil {
			return "", fmt.Errorf("localdb: clone %s: %w", template, err)
		}
		return s.DSN(name), nil
	}
	if _, err := s.CreateDatabase(ctx, name); err != nil {
		return "", err
	}
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'`, template)
	if err != nil {
		return "", err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return "", err
		}
		tables = append(tables, t)
	}
	rows.Close()
	for _, t := range tables {
		for _, q := range []string{
			"CREATE TABLE `" + name + "`.`" + t + "` LIKE `" + template + "`.`" + t + "`",
			"INSERT INTO `" + name + "`.`" + t + "` SELECT * FROM `" + template + "`.`" + t + "`",
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return "", fmt.Errorf("localdb: clone %s.%s: %w", template, t, err)
			}
		}
	}
	return s.DSN(name), nil
}

// DropDatabase drops a database, disconnecting its sessions.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	db, err := s.Admin()
	if err != nil {
		return err
	}
	defer db.Close()
	q := `DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`
	if s.Family == "postgres" {
		// WITH (FORCE) does not drop the database's replication slots (a
		// streaming relay's): end their sessions and drop them first.
		for i := 0; i < 20; i++ {
			db.ExecContext(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, name)
			db.ExecContext(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, name)
			var n int
			if db.QueryRowContext(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, name).Scan(&n); n == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if s.Family == "mysql" {
		q = "DROP DATABASE IF EXISTS `" + name + "`"
		// Like WITH (FORCE): end sessions a failed test left in the database.
		rows, err := db.QueryContext(ctx, `SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()`, name)
		if err == nil {
			var ids []int64
			for rows.Next() {
				var id int64
				rows.Scan(&id)
				ids = append(ids, id)
			}
			rows.Close()
			for _, id := range ids {
				db.ExecContext(ctx, "KILL ?", id)
			}
		}
	}
	_, err = db.ExecContext(ctx, q)
	return err
}

// Stop shuts the server down and removes its directory.
func (s *Server) Stop() error {
	switch s.Source {
	case "docker":
		return s.stopFn()
	case "local":
		err := s.halt(s.stopSignal(), 20*time.Second)
		os.RemoveAll(s.dir)
		return err
	}
	return nil
}

// Restart stops the server (fast shutdown) and starts it again on the same
// port and data directory. Only for local servers.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Halt(); err != nil {
		return err
	}
	return s.Resume(ctx)
}

// Halt stops a local server without removing its data (see Resume).
func (s *Server) Halt() error {
	if s.Source != "local" {
		return fmt.Errorf("localdb: restart needs a local server (this one is %s)", s.Source)
	}
	return s.halt(s.stopSignal(), 20*time.Second)
}

// stopSignal is the server's fast-shutdown signal: PostgreSQL's SIGTERM is
// a "smart" shutdown that waits for every client to disconnect.
func (s *Server) stopSignal() syscall.Signal {
	if s.stopSig != 0 {
		return s.stopSig
	}
	if s.Family == "postgres" {
		return syscall.SIGINT
	}
	return syscall.SIGTERM
}

// Resume starts a halted local server again and waits until it is ready.
func (s *Server) Resume(ctx context.Context) error {
	if err := s.spawn(); err != nil {
		return err
	}
	return s.waitReady(ctx, 30*time.Second)
}

func (s *Server) halt(sig syscall.Signal, grace time.Duration) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
	return nil
}

func (s *Server) spawn() error {
	cmd := exec.Command(s.bin, s.args...)
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("localdb: start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

func (s *Server) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	db, err := s.Admin()
	if err != nil {
		return err
	}
	defer db.Close()
	var last error
	for time.Now().Before(deadline) {
		s.mu.Lock()
		exited := s.exited
		s.mu.Unlock()
		select {
		case <-exited:
			return fmt.Errorf("localdb: %s exited during start-up; log:\n%s", s.Family, s.logTail())
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = db.PingContext(pctx)
		cancel()
		if last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("localdb: %s not ready after %v: %v; log:\n%s", s.Family, limit, last, s.logTail())
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// Pid is the server's process id (local servers), for fault injection.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// serviceUser returns the credential to run a server as when we are root.
func serviceUser(name string) (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("localdb: running as root, and user %q does not exist to run the server as (install the server package: make setup): %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, uid, gid, nil
}

func newDir(kind string, uid, gid int) (string, error) {
	sweep()
	dir, err := os.MkdirTemp("", "sqlcoord-localdb-"+kind+"-")
	if err != nil {
		return "", err
	}
	os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// sweep removes directories left by harness processes that were killed
// before they could clean up (their servers died with them).
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "sqlcoord-localdb-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(d)
		}
	}
}

func findPgBin() (string, error) {
	if d := os.Getenv("SQLCOORD_PG_BIN"); d != "" {
		return d, nil
	}
	cands, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Sort(sort.Reverse(sort.StringSlice(cands)))
	for _, c := range cands {
		if strings.Contains(c, "/15/") {
			return filepath.Dir(c), nil
		}
	}
	if len(cands) > 0 {
		return filepath.Dir(cands[0]), nil
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL server binaries not found (apt-get install -y postgresql-15, or run `make setup`)")
}

func run(ctx context.Context, cred *syscall.Credential, dir string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("localdb: %s: %w\n%s", filepath.Base(name), err, out)
	}
	return nil
}

// startLocalPostgres runs initdb and postgres in a fresh temp directory.
func startLocalPostgres(ctx context.Context) (*Server, error) {
	return startLocalPostgresArgs(ctx, nil)
}

func startLocalPostgresArgs(ctx context.Context, extra []string) (*Server, error) {
	return startPostgresOn(ctx, "pg", extra, "initdb", func(data string) []string {
		return []string{"-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"}
	})
}

// startPostgresOn makes a fresh directory (named for kind), fills its data
// directory by running the PostgreSQL program fill (initdb, pg_basebackup)
// with fillArgs(data), and starts postgres on it with extra arguments.
func startPostgresOn(ctx context.Context, kind string, extra []string, fill string, fillArgs func(data string) []string) (*Server, error) {
	bin, err := findPgBin()
	if err != nil {
		return nil, err
	}
	cred, uid, gid, err := serviceUser("postgres")
	if err != nil {
		return nil, err
	}
	dir, err := newDir(kind, uid, gid)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	prog := filepath.Join(bin, fill)
	if filepath.IsAbs(fill) {
		prog = fill
	}
	if err := run(ctx, cred, dir, prog, fillArgs(data)...); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if kind == "pgpitr" { // a copied base backup: recover, then start
		os.Remove(filepath.Join(data, "standby.signal"))
		if err := os.WriteFile(filepath.Join(data, "recovery.signal"), nil, 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		os.Chown(filepath.Join(data, "recovery.signal"), uid, gid)
	}
	return startOnFreePort(ctx, dir, func(port int) *Server {
		return pgServer(bin, dir, data, port, cred, extra)
	})
}

// pgServer describes a local PostgreSQL server on data: the throwaway
// defaults (no fsync: nothing here must survive the machine; wal_level
// logical with bounded slots for the streaming relay), then
// SQLCOORD_PG_ARGS, then extra.
func pgServer(bin, dir, data string, port int, cred *syscall.Credential, extra []string) *Server {
	args := append([]string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=400", "-c", "shared_buffers=256MB", "-c", "log_min_messages=warning",
		"-c", "max_locks_per_transaction=256",
		// the outbox's streaming relay (logical replication) can run here
		"-c", "wal_level=logical", "-c", "max_replication_slots=32", "-c", "max_wal_senders=32",
		"-c", "max_slot_wal_keep_size=1GB"}, extraArgs("SQLCOORD_PG_ARGS")...)
	return &Server{Family: "postgres", Source: "local", Host: "127.0.0.1", Port: port, dir: dir, cred: cred,
		bin: filepath.Join(bin, "postgres"), args: append(args, extra...),
		adminDSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
	}
}

// startOnFreePort starts the server that mk describes on a free loopback
// port, trying another port if the first was taken meanwhile; it removes
// dir when every try failed.
func startOnFreePort(ctx context.Context, dir string, mk func(port int) *Server) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := mk(port)
		if err := s.spawn(); err != nil {
			return nil, err
		}
		if lastErr = s.waitReady(ctx, 30*time.Second); lastErr == nil {
			return s, nil
		}
		s.halt(syscall.SIGKILL, time.Second)
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// startLocalMariaDB runs mariadb-install-db and mariadbd in a temp dir.
func startLocalMariaDB(ctx context.Context) (*Server, error) {
	m, err := installMariaDB(ctx, "my")
	if err != nil {
		return nil, err
	}
	return startOnFreePort(ctx, m.dir, func(port int) *Server { return m.server(port, nil) })
}

// mariaInstall is an initialised, not yet started MariaDB data directory.
type mariaInstall struct {
	bin, dir, data string
	cred           *syscall.Credential
}

func installMariaDB(ctx context.Context, kind string) (*mariaInstall, error) {
	installDB, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		if installDB, err = exec.LookPath("mysql_install_db"); err != nil {
			return nil, errors.New("MariaDB server not found (apt-get install -y mariadb-server, or run `make setup`)")
		}
	}
	server := ""
	for _, c := range []string{"mariadbd", "/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld"} {
		if p, err := exec.LookPath(c); err == nil {
			server = p
			break
		}
	}
	if server == "" {
		return nil, errors.New("mariadbd not found (apt-get install -y mariadb-server, or run `make setup`)")
	}
	cred, uid, gid, err := serviceUser("mysql")
	if err != nil {
		return nil, err
	}
	dir, err := newDir(kind, uid, gid)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	// Its own tmpdir: concurrent installs (test packages run in parallel,
	// Galera nodes) sharing /tmp were seen failing on each other's
	// temporary tables ("Error on delete of '/tmp/#sql-temptable-…'").
	var ierr error
	for attempt := 0; attempt < 2; attempt++ {
		os.RemoveAll(data)
		if ierr = run(ctx, cred, dir, installDB, "--no-defaults", "--datadir="+data, "--tmpdir="+dir,
			"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"); ierr == nil {
			break
		}
	}
	if ierr != nil {
		os.RemoveAll(dir)
		return nil, ierr
	}
	return &mariaInstall{bin: server, dir: dir, data: data, cred: cred}, nil
}

// server describes mariadbd on the install: the throwaway defaults, then
// SQLCOORD_MYSQL_ARGS, then extra.
func (m *mariaInstall) server(port int, extra []string) *Server {
	args := append([]string{"--no-defaults", "--datadir=" + m.data, "--port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1", "--socket=" + filepath.Join(m.dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(m.dir, "mysqld.pid"), "--tmpdir=" + m.dir,
		"--skip-log-bin", "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=0",
		"--innodb-buffer-pool-size=256M", "--max-connections=600", "--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_bin", "--log-error=" + filepath.Join(m.dir, "server.log")},
		extraArgs("SQLCOORD_MYSQL_ARGS")...)
	return &Server{Family: "mysql", Source: "local", Host: "127.0.0.1", Port: port, dir: m.dir, cred: m.cred, bin: m.bin,
		args:     append(args, extra...),
		adminDSN: fmt.Sprintf("root@tcp(127.0.0.1:%d)/?parseTime=true&loc=UTC&clientFoundRows=true", port),
	}
}

// extraArgs is the space-separated server arguments in the environment
// variable key; they come last, so they override the defaults (PostgreSQL
// takes the last -c of a setting, mariadbd the last option).
func extraArgs(key string) []string { return strings.Fields(os.Getenv(key)) }

// fromEnv uses an existing server named by SQLCOORD_PG_DSN/SQLCOORD_MYSQL_DSN.
func fromEnv(family string) (*Server, bool, error) {
	key := map[string]string{"postgres": "SQLCOORD_PG_DSN", "mysql": "SQLCOORD_MYSQL_DSN"}[family]
	dsn := os.Getenv(key)
	if dsn == "" {
		return nil, false, nil
	}
	s := &Server{Family: family, Source: "env"}
	if family == "postgres" {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, true, fmt.Errorf("localdb: %s: %w", key, err)
		}
		s.Host = u.Hostname()
		s.Port, _ = strconv.Atoi(u.Port())
		s.adminDSN = dsn
	} else {
		d := strings.TrimPrefix(dsn, "mysql://")
		cfg, err := mysql.ParseDSN(d)
		if err != nil {
			return nil, true, fmt.Errorf("localdb: %s: %w", key, err)
		}
		cfg.DBName = ""
		cfg.ParseTime = true
		s.adminDSN = cfg.FormatDSN()
		h, p, _ := net.SplitHostPort(cfg.Addr)
		s.Host = h
		s.Port, _ = strconv.Atoi(p)
	}
	return s, true, nil
}

// Fallback, when set, is tried when no local server can be started.
var Fallback func(ctx context.Context, family string) (*Server, error)

// NewServer describes a server started elsewhere (e.g. in a container):
// adminDSN reaches its maintenance database, stop ends it.
func NewServer(family, source, host string, port int, adminDSN string, stop func() error) *Server {
	return &Server{Family: family, Source: source, Host: host, Port: port, adminDSN: adminDSN, stopFn: stop}
}

// WaitReady waits up to limit for the server to accept connections.
func (s *Server) WaitReady(ctx context.Context, limit time.Duration) error {
	return s.waitReady(ctx, limit)
}

// Start provides a server for family, trying the sources in the package
// documentation's order.
func Start(ctx context.Context, family string) (*Server, error) {
	if s, ok, err := fromEnv(family); ok {
		return s, err
	}
	var s *Server
	var err error
	if family == "postgres" {
		s, err = startLocalPostgres(ctx)
	} else {
		s, err = startLocalMariaDB(ctx)
	}
	if err == nil {
		return s, nil
	}
	if Fallback == nil {
		return nil, fmt.Errorf("localdb: no %s server: local: %v. Run `make setup` (installs postgresql-15 and mariadb-server), or set %s",
			family, err, map[string]string{"postgres": "SQLCOORD_PG_DSN", "mysql": "SQLCOORD_MYSQL_DSN"}[family])
	}
	ds, derr := Fallback(ctx, family)
	if derr == nil {
		return ds, nil
	}
	return nil, fmt.Errorf("localdb: no %s server: local: %v; fallback: %v. Run `make setup` (installs postgresql-15 and mariadb-server), or set %s",
		family, err, derr, map[string]string{"postgres": "SQLCOORD_PG_DSN", "mysql": "SQLCOORD_MYSQL_DSN"}[family])
}
