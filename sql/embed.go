// Package sqlschema embeds sqlcoord's golang-migrate migrations, one folder
// per dialect family: postgres/ and mysql/. Files are NNNNNN_name.up.sql and
// NNNNNN_name.down.sql; every up has a working down.
//
// To run them with your own golang-migrate setup instead of `sqlcoord
// migrate`, point a file source at this folder and set the migrations table
// to coord_schema_migrations so sqlcoord's history stays apart from yours.
package sqlschema

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql mysql/*.sql
var files embed.FS

// FS returns the migrations for a dialect family ("postgres" or "mysql").
func FS(family string) (fs.FS, error) {
	return fs.Sub(files, family)
}
