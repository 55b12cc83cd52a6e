package sqlcoord

import (
	"context"
	"database/sql/driver"
	"sync"

	"github.com/sqlcoord/sqlcoord/dialects"
)

// MySQL and MariaDB have no transaction-scoped idle timeout: the
// coord.Client.SetIdleTimeout of a MySQL-family transaction sets a session
// variable (idle_transaction_timeout, wait_timeout), which would stay on
// the pooled connection and cut the next, unrelated transaction that
// idles longer. In a pool that Open made, the connection remembers that
// sqlcoord set it and resets it to the server's default before
// database/sql hands the connection to anyone else.

// resetConnector is go-sql-driver's connector with resetConn connections.
type resetConnector struct{ driver.Connector }

func (c resetConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &resetConn{inner: conn}, nil
}

// resetStatements maps each MySQL-family idle-timeout statement to the one
// that puts the session's value back to the global default.
var resetStatements = func() map[string]string {
	m := map[string]string{}
	for _, d := range []*dialects.Dialect{dialects.MySQL, dialects.MariaDB} {
		m[d.Q().IdleTxTimeoutSet] = d.Q().IdleTxTimeoutReset
	}
	return m
}()

// resetConn passes everything to go-sql-driver's connection and notes a
// session idle timeout set through it.
type resetConn struct {
	inner driver.Conn
	mu    sync.Mutex
	reset string // statement that undoes what sqlcoord set; "" if nothing
}

var (
	_ driver.ConnBeginTx        = (*resetConn)(nil)
	_ driver.ConnPrepareContext = (*resetConn)(nil)
	_ driver.ExecerContext      = (*resetConn)(nil)
	_ driver.QueryerContext     = (*resetConn)(nil)
	_ driver.Pinger             = (*resetConn)(nil)
	_ driver.SessionResetter    = (*resetConn)(nil)
	_ driver.NamedValueChecker  = (*resetConn)(nil)
)

func (c *resetConn) Prepare(query string) (driver.Stmt, error) { return c.inner.Prepare(query) }
func (c *resetConn) Close() error                              { return c.inner.Close() }

//lint:ignore SA1019 driver.Conn requires Begin
func (c *resetConn) Begin() (driver.Tx, error) { return c.inner.Begin() } //nolint:staticcheck

func (c *resetConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.inner.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *resetConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.inner.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *resetConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if r, ok := resetStatements[query]; ok {
		c.mu.Lock()
		c.reset = r
		c.mu.Unlock()
	}
	return c.inner.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *resetConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.inner.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *resetConn) Ping(ctx context.Context) error { return c.inner.(driver.Pinger).Ping(ctx) }

func (c *resetConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.inner.(driver.NamedValueChecker).CheckNamedValue(nv)
}

// ResetSession runs before database/sql reuses the connection.
func (c *resetConn) ResetSession(ctx context.Context) error {
	if err := c.inner.(driver.SessionResetter).ResetSession(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	r := c.reset
	c.reset = ""
	c.mu.Unlock()
	if r == "" {
		return nil
	}
	if _, err := c.inner.(driver.ExecerContext).ExecContext(ctx, r, nil); err != nil {
		return driver.ErrBadConn // not reusable as it is: database/sql opens another
	}
	return nil
}
