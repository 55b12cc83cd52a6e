// Command modproxy writes a Go module proxy directory (for GOPROXY=file://…)
// holding every module of this checkout at one version, as a release would
// publish them: what CI installs from in an empty module cache to prove that
// `go install …/cmd/sqlcoord@version` and `go get` work for a user
// (scripts/install-test.sh). Nothing is published anywhere.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	root := flag.String("root", ".", "the checkout")
	out := flag.String("out", "", "proxy directory to write")
	version := flag.String("version", "v1.2.0", "version every module is published at")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "modproxy: -out is required")
		os.Exit(2)
	}
	if err := run(*root, *out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(root, out, version string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return err
		}
		path := modfile.ModulePath(gomod)
		if path == "" || !strings.HasPrefix(path, "github.com/sqlcoord/") {
			continue
		}
		if err := publish(out, dir, path, version, gomod); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Printf("%s@%s\n", path, version)
	}
	return nil
}

func publish(out, dir, path, version string, gomod []byte) error {
	esc, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	z, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(z, module.Version{Path: path, Version: version}, dir); err != nil {
		z.Close()
		return err
	}
	if err := z.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, version+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	if err := os.WriteFile(filepath.Join(at, version+".info"), info, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644)
}
