package dbtest

import (
	"context"
	"fmt"
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

	"github.com/go-sql-driver/mysql"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/localdb"
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

type config struct{ migrate bool }

// NoMigrate leaves the fresh database empty.
func NoMigrate() Option { return func(c *config) { c.migrate = false } }

// Run runs fn once per dialect family as subtests "postgres" and "mysql",
// each on a fresh database that is dropped afterwards.
func Run(t *testing.T, fn func(t *testing.T, env *Env), opts ...Option) {
	t.Helper()
	for _, fam := range Families {
		t.Run(fam, func(t *testing.T) {
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
	dsn, err := srv.CreateDatabase(ctx, name)
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
	if c.migrate {
		if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
			t.Fatalf("migrate up (%s): %v", family, err)
		}
	}
	return &Env{Family: family, Server: srv, Name: name, DSN: db.DSN(), DB: db}
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
