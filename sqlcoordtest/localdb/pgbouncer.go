package localdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// StartPgBouncer starts a throwaway PgBouncer (Debian package pgbouncer)
// in front of the local or environment PostgreSQL server pg, in
// transaction pooling mode with poolSize server connections per database
// and user. It runs as the postgres user when the process is root, listens
// on a free loopback port and trusts every client (like the throwaway
// server). The returned Server's DSN(name) reaches database name through
// the bouncer; create and drop databases on pg itself. Stop it when done.
func StartPgBouncer(ctx context.Context, pg *Server, poolSize int) (*Server, error) {
	if pg.Family != "postgres" {
		return nil, fmt.Errorf("localdb: pgbouncer needs a PostgreSQL server, not %s", pg.Family)
	}
	if poolSize < 1 {
		return nil, fmt.Errorf("localdb: pgbouncer pool size %d, want at least 1", poolSize)
	}
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			return nil, errors.New("localdb: pgbouncer not found (apt-get install -y pgbouncer, or run `make setup`)")
		}
		bin = "/usr/sbin/pgbouncer"
	}
	cred, uid, gid, err := serviceUser("postgres")
	if err != nil {
		return nil, err
	}
	dir, err := newDir("bouncer", uid, gid)
	if err != nil {
		return nil, err
	}
	users := filepath.Join(dir, "users.txt")
	if err := os.WriteFile(users, []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		return nil, err
	}
	return startOnFreePort(ctx, dir, func(port int) *Server {
		ini := filepath.Join(dir, "pgbouncer.ini")
		conf := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 2000
max_db_connections = 0
server_reset_query =
ignore_startup_parameters = extra_float_digits
pidfile = %s
log_connections = 0
log_disconnections = 0
`, pg.Host, pg.Port, port, users, poolSize, filepath.Join(dir, "pgbouncer.pid"))
		os.WriteFile(ini, []byte(conf), 0o644)
		return &Server{Family: "postgres", Source: "local", Host: "127.0.0.1", Port: port, dir: dir, cred: cred,
			bin: bin, args: []string{ini}, stopSig: syscall.SIGTERM,
			adminDSN: "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable",
		}
	})
}
