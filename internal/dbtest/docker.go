package dbtest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/sqlcoord/sqlcoord/internal/localdb"
)

// Server is a throwaway or existing database server (see internal/localdb).
type Server = localdb.Server

// Families lists the dialect families the harness provides.
var Families = localdb.Families

// Start provides a server for family: SQLCOORD_*_DSN, local binaries, or
// a Docker daemon.
func Start(ctx context.Context, family string) (*Server, error) { return localdb.Start(ctx, family) }

func init() { localdb.Fallback = startDocker }

// startDocker starts the server in a container with testcontainers-go, for
// developers who have Docker but not the server packages. CI here has no
// Docker engine; this path is for users' machines.
func startDocker(ctx context.Context, family string) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	req := testcontainers.ContainerRequest{
		Image:        "postgres:15",
		ExposedPorts: []string{"5432/tcp"},
		Env:          map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"},
		Cmd:          []string{"postgres", "-c", "fsync=off", "-c", "max_connections=400"},
		WaitingFor:   wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
	}
	port := "5432/tcp"
	if family == "mysql" {
		port = "3306/tcp"
		req = testcontainers.ContainerRequest{
			Image:        "mariadb:10.11",
			ExposedPorts: []string{port},
			Env:          map[string]string{"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD": "1"},
			Cmd:          []string{"--max-connections=600", "--innodb-flush-log-at-trx-commit=0"},
			WaitingFor:   wait.ForListeningPort(port),
		}
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if err != nil {
		return nil, err
	}
	ep, err := c.PortEndpoint(ctx, port, "")
	if err != nil {
		c.Terminate(context.Background())
		return nil, err
	}
	if i := strings.Index(ep, "://"); i >= 0 {
		ep = ep[i+3:]
	}
	host, p, err := net.SplitHostPort(ep)
	if err != nil {
		c.Terminate(context.Background())
		return nil, err
	}
	n, _ := strconv.Atoi(p)
	admin := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", ep)
	if family == "mysql" {
		admin = fmt.Sprintf("root@tcp(%s)/?parseTime=true&loc=UTC&clientFoundRows=true", ep)
	}
	s := localdb.NewServer(family, "docker", host, n, admin, func() error { return c.Terminate(context.Background()) })
	if err := s.WaitReady(ctx, 60*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}
