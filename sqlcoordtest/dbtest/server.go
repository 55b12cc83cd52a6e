package dbtest

import (
	"context"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

// Server is a throwaway or existing database server (see sqlcoordtest/localdb).
type Server = localdb.Server

// Families lists the dialect families the harness provides.
var Families = localdb.Families

// Start provides a server for family: SQLCOORD_*_DSN, or local binaries.
// (With Docker and no local servers, start one with package containers
// and point SQLCOORD_PG_DSN / SQLCOORD_MYSQL_DSN at it.)
func Start(ctx context.Context, family string) (*Server, error) { return localdb.Start(ctx, family) }
