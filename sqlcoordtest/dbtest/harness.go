package dbtest

import (
	"context"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"io"
	"log"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/partitions"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

var (
	mu      sync.Mutex
	servers = map[string]*Server{}
	errs    = map[string]error{}
	seq     atomic.Int64
	sigOnce sync.Once
)

// Shared returns the process-wide server for family, starting it on first
// use. Call StopAll before the process exits (Main does).
func Shared(ctx context.Context, family string) (*Server, error) {
	mu.Lock()
	defer mu.Unlock()
	if s := servers[family]; s != nil {
		return s, nil
	}
	if err := errs[family]; err != nil {
		return nil, err
	}
	sigOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := <-ch
			StopAll()
			fmt.Fprintf(os.Stderr, "dbtest: %v: stopped throwaway servers\n", sig)
			os.Exit(130)
		}()
	})
	s, err := Start(ctx, family)
	if err != nil {
		errs[family] = err
		return nil, err
	}
	servers[family] = s
	return s, nil
}

// StopAll stops every server Shared started.
func StopAll() {
	mu.Lock()
	defer mu.Unlock()
	for k, s := range servers {
		tplMu.Lock()
		if name, ok := tpls[s]; ok {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s.DropDatabase(ctx, name)
			cancel()
			delete(tpls, s)
		}
		tplMu.Unlock()
		s.Stop()
		delete(servers, k)
	}
}

func init() {
	// go-sql-driver logs every connection a fault test breaks; the tests
	// assert on the errors themselves.
	mysql.SetLogger(log.New(io.Discard, "", 0))
}

// Main is TestMain for packages that use the harness: it runs the tests
// and then stops the servers, whatever the outcome.
func Main(m *testing.M) {
	code := m.Run()
	StopAll()
	os.Exit(code)
}

// Env is one test's database: a fresh database on a real server, with the
// sqlcoord schema installed (unless NoMigrate was used).
type Env struct {
	Family string
	Server *Server
	Name   string // database name
	DSN    string // driver DSN of the database
	DB     *sqlcoord.DB
}

// Open opens another pool on the same database (its own connections).
func (e *Env) Open(t testing.TB, opts ...sqlcoord.Options) *sqlcoord.DB {
	t.Helper()
	db, err := sqlcoord.Open(context.Background(), e.DSN, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", e.Family, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Option changes how Run prepares the database.
type Option func(*config)

type config struct{ migrate, serial bool }

// Serial runs the families one after the other (a test that sets
// environment variables, which parallel tests may not).
func Serial() Option { return func(c *config) { c.serial = true } }

// NoMigrate leaves the fresh database empty.
func NoMigrate() Option { return func(c *config) { c.migrate = false } }

// Run runs fn once per dialect family as subtests "postgres" and "mysql",
// in parallel (unless Serial), each on a fresh database that is dropped
// afterwards.
func Run(t *testing.T, fn func(t *testing.T, env *Env), opts ...Option) {
	t.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	for _, fam := range Families {
		t.Run(fam, func(t *testing.T) {
			if !c.serial {
				t.Parallel()
			}
			env := New(t, fam, opts...)
			fn(t, env)
		})
	}
}

// New prepares a fresh database on the family's shared server for t.
func New(t testing.TB, family string, opts ...Option) *Env {
	t.Helper()
	c := config{migrate: true}
	for _, o := range opts {
		o(&c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := Shared(ctx, family)
	if err != nil {
		t.Fatalf("%v", err)
	}
	name := fmt.Sprintf("sqlcoord_t%d_%d", os.Getpid(), seq.Add(1))
	var dsn string
	if c.migrate {
		// A copy of a database migrated once per server and process: the
		// schema without running every migration again.
		tpl, terr := template(ctx, srv)
		if terr != nil {
			t.Fatalf("template database: %v", terr)
		}
		dsn, err = srv.CloneDatabase(ctx, tpl, name)
		if err == nil {
			err = freshInstall(ctx, family, dsn)
		}
	} else {
		dsn, err = srv.CreateDatabase(ctx, name)
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 64, MaxIdleConns: 64})
	if err != nil {
		t.Fatalf("open %s: %v", family, err)
	}
	t.Cleanup(func() {
		db.Close()
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		srv.DropDatabase(dctx, name)
	})
	return &Env{Family: family, Server: srv, Name: name, DSN: core.ConnString(db), DB: db}
}

// freshInstall makes a database cloned from the template look installed
// on the server as it runs now, as migration 20 leaves a new install: the
// template's newest history is confirmed for the server's current run.
// Without it, every database cloned after a test restarted the shared
// server would start a new failover epoch at its first counter statement
// (a restart is a new history, docs/failover.md), and its first worker-id
// grant would wait out the epoch's grace.
func freshInstall(ctx context.Context, family, dsn string) error {
	db, err := sqlcoord.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	stmts := []string{`UPDATE coord_forks SET boot = pg_postmaster_start_time(), rel = tableoid WHERE base = (SELECT max(base) FROM coord_forks)`}
	if family != "postgres" {
		stmts = []string{"INSERT IGNORE INTO coord_run (k, id) VALUES (1, UUID())",
			"UPDATE coord_forks f JOIN (SELECT MAX(base) AS m FROM coord_forks) t ON f.base = t.m JOIN coord_run r ON r.k = 1 SET f.run = r.id"}
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("fresh install: %w", err)
		}
	}
	return nil
}

// PartitionedEnv makes every test database's outbox partitioned
// (partitions.Enable with partitions of 1,000 ids, one made ahead and no
// Roll, so that busy tests also fill the catch-all partition) when set to
// anything but "keys", and its idempotency keys (partitions.EnableKeys, a
// partition per 30 s, one ahead, no Roll) when set to "keys" or
// "outbox,keys": `SQLCOORD_TEST_PARTITIONED=1 go test ./outbox/...` runs
// the outbox's tests on a partitioned table,
// `SQLCOORD_TEST_PARTITIONED=keys go test ./txn/...` the keys'.
const PartitionedEnv = "SQLCOORD_TEST_PARTITIONED"

var (
	tplMu sync.Mutex
	tpls  = map[*Server]string{}
)

// template returns the name of srv's template database, migrated to the
// latest schema, creating it on first use (once per process).
func template(ctx context.Context, srv *Server) (string, error) {
	tplMu.Lock()
	defer tplMu.Unlock()
	if name, ok := tpls[srv]; ok {
		return name, nil
	}
	name := fmt.Sprintf("sqlcoord_tpl%d", os.Getpid())
	dsn, err := srv.CreateDatabase(ctx, name)
	if err != nil {
		return "", err
	}
	db, err := sqlcoord.Open(ctx, dsn)
	if err != nil {
		return "", err
	}
	err = migrate.Migrate(ctx, db, migrate.Up)
	parts := os.Getenv(PartitionedEnv)
	if err == nil && parts != "" && parts != "keys" && db.Dialect().Partitioner() != nil {
		err = partitions.Enable(ctx, db, partitions.Options{Size: 1000, Ahead: 1})
	}
	if err == nil && (parts == "keys" || parts == "outbox,keys") && db.Dialect().KeyPartitioner() != nil {
		err = partitions.EnableKeys(ctx, db, partitions.KeysOptions{Period: 30 * time.Second, Ahead: 1})
	}
	db.Close() // PostgreSQL copies a template only while nobody is connected to it
	if err != nil {
		return "", err
	}
	tpls[srv] = name
	return name, nil
}

// PgBouncer starts a PgBouncer in transaction pooling mode with poolSize
// server connections in front of e's PostgreSQL server, stopped when t
// ends, and returns the DSN of e's database through it.
func (e *Env) PgBouncer(t testing.TB, poolSize int) string {
	t.Helper()
	if e.Family != "postgres" {
		t.Fatalf("PgBouncer: %s is not PostgreSQL", e.Family)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := localdb.StartPgBouncer(ctx, e.Server, poolSize)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { b.Stop() })
	return b.DSN(e.Name)
}

// PrivatePostgres starts a PostgreSQL server of the test's own with extra
// server arguments (e.g. "-c", "fsync=on"), creates database name on it,
// opens it with opt and migrates it up; server and pool end with the test.
func PrivatePostgres(t testing.TB, name string, opt sqlcoord.Options, args ...string) *sqlcoord.DB {
	t.Helper()
	ctx := context.Background()
	srv, err := localdb.StartPostgres(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	dsn, err := srv.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlcoord.Open(ctx, dsn, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	return db
}
