package core

import (
	"context"
	"database/sql"
	"errors"

	"github.com/sqlcoord/sqlcoord/dialects"
)

// Stack is what sqlcoord's own packages need of a driver beyond
// sqlcoord.Base. Begin is required; a nil field is a stack without it.
type Stack struct {
	// Begin starts a transaction that sqlcoord itself commits (a lease
	// acquire, a segment fetch, a relay batch).
	Begin func(ctx context.Context, opts *sql.TxOptions) (dialects.OwnedTx, error)
	// OwnConn opens a connection beside the pool, held until close (a
	// MySQL-family waiter sleeps on it).
	OwnConn func(ctx context.Context) (x dialects.Executor, close func() error, err error)
	// ConnString is the driver DSN sqlcoord opened, password included
	// ("" for a wrapped pool): a migration's or a stream's own connection.
	ConnString func() string
	// SQLDB is a database/sql pool on the driver's pool (migrations).
	SQLDB func() *sql.DB
}

// Plumbing carries a driver's Stack. Every driver embeds one (through an
// unexported alias), so none of it is on a driver's public surface, and
// a type outside this module cannot be a sqlcoord.Base.
type Plumbing struct{ s Stack }

// NewPlumbing is a driver's Plumbing.
func NewPlumbing(s Stack) Plumbing { return Plumbing{s} }

func (p Plumbing) plumbing() Stack { return p.s }

// Sealed is implemented only by types that embed a Plumbing: sqlcoord's
// drivers (sqlcoord.Base embeds it).
type Sealed interface{ plumbing() Stack }

// Owned starts a transaction on db that sqlcoord itself commits.
func Owned(ctx context.Context, db Sealed, opts *sql.TxOptions) (dialects.OwnedTx, error) {
	return db.plumbing().Begin(ctx, opts)
}

// ErrNoOwnConn: the driver cannot open a connection of its own.
var ErrNoOwnConn = errors.New("sqlcoord: the driver opens no connection of its own")

// OwnConn opens a connection beside db's pool (see Stack.OwnConn).
func OwnConn(ctx context.Context, db Sealed) (dialects.Executor, func() error, error) {
	if f := db.plumbing().OwnConn; f != nil {
		return f(ctx)
	}
	return nil, nil, ErrNoOwnConn
}

// ConnString is the DSN sqlcoord opened db with ("" for a wrapped pool or
// a driver that has none).
func ConnString(db Sealed) string {
	if f := db.plumbing().ConnString; f != nil {
		return f()
	}
	return ""
}

// SQLDB is a database/sql pool on db's pool (nil when it has none).
func SQLDB(db Sealed) *sql.DB {
	if f := db.plumbing().SQLDB; f != nil {
		return f()
	}
	return nil
}
