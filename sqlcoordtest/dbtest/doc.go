// Package dbtest is the test kit's harness: a fresh database with the
// sqlcoord schema on a throwaway server for each test (New, Run over both
// dialect families), servers shared by a test binary and stopped by Main,
// helper processes (Spawn, MainWithHelpers) for tests across OS
// processes, and a TCP proxy that cuts connections (NewProxy). Servers
// come from SQLCOORD_PG_DSN / SQLCOORD_MYSQL_DSN, else local binaries (see
// package localdb). No compatibility promise, like package sqlcoordtest.
package dbtest
