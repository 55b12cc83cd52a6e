// Package containers starts throwaway PostgreSQL 15 and MariaDB 10.11
// servers in Docker containers (testcontainers-go) for tests of
// applications that use sqlcoord, on machines with a Docker engine. A
// module of its own, so that the library does not require
// testcontainers-go.
//
//	dsn, stop, err := containers.Postgres(ctx)
//	defer stop()
//	db, err := sqlcoord.Open(ctx, dsn)
package containers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Postgres starts PostgreSQL 15 (trust authentication, fsync off) and
// returns a DSN of its postgres database and a function that removes the
// container.
func Postgres(ctx context.Context) (dsn string, stop func() error, err error) {
	return start(ctx, testcontainers.ContainerRequest{
		Image:        "postgres:15",
		ExposedPorts: []string{"5432/tcp"},
		Env:          map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"},
		Cmd:          []string{"postgres", "-c", "fsync=off", "-c", "max_connections=400"},
		WaitingFor:   wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
	}, "5432/tcp", "postgres://postgres@%s/postgres?sslmode=disable")
}

// MariaDB starts MariaDB 10.11 (root without a password) and returns a
// DSN of its mysql database and a function that removes the container.
// Create a database of your own for sqlcoord's schema.
func MariaDB(ctx context.Context) (dsn string, stop func() error, err error) {
	return start(ctx, testcontainers.ContainerRequest{
		Image:        "mariadb:10.11",
		ExposedPorts: []string{"3306/tcp"},
		Env:          map[string]string{"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD": "1"},
		Cmd:          []string{"--max-connections=600", "--innodb-flush-log-at-trx-commit=0"},
		WaitingFor:   wait.ForListeningPort("3306/tcp"),
	}, "3306/tcp", "mysql://root@tcp(%s)/mysql")
}

func start(ctx context.Context, req testcontainers.ContainerRequest, port, dsnFormat string) (string, func() error, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if err != nil {
		return "", nil, err
	}
	stop := func() error { return c.Terminate(context.Background()) }
	ep, err := c.PortEndpoint(ctx, port, "")
	if err != nil {
		stop()
		return "", nil, err
	}
	if i := strings.Index(ep, "://"); i >= 0 {
		ep = ep[i+3:]
	}
	return fmt.Sprintf(dsnFormat, ep), stop, nil
}
