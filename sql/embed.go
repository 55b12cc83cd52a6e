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
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed postgres/*.sql mysql/*.sql
var files embed.FS

// FS returns the migrations for a dialect family ("postgres" or "mysql").
func FS(family string) (fs.FS, error) {
	return fs.Sub(files, family)
}

// Versions lists the migration versions embedded for a family.
func Versions(family string) ([]uint, error) {
	fsys, err := FS(family)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	seen := map[uint]bool{}
	var out []uint
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(n, 10, 32)
		if err != nil || seen[uint(v)] {
			continue
		}
		seen[uint(v)] = true
		out = append(out, uint(v))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if len(out) == 0 {
		return nil, fmt.Errorf("sqlcoord: no migrations embedded for %s", family)
	}
	return out, nil
}
