package sqlcoord_test

import (
	"fmt"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// snippetImports are the packages a documentation snippet may use without
// an import line, by the name it uses them under.
var snippetImports = map[string]string{
	"context": "context", "sql": "database/sql", "errors": "errors", "fmt": "fmt", "log": "log",
	"http": "net/http", "os": "os", "time": "time", "json": "encoding/json", "slog": "log/slog",
	"pgx": "github.com/jackc/pgx/v5", "pgxpool": "github.com/jackc/pgx/v5/pgxpool", "sqlx": "github.com/jmoiron/sqlx",
	"sqlcoord": "github.com/sqlcoord/sqlcoord", "coord": "github.com/sqlcoord/sqlcoord/coord",
	"ids": "github.com/sqlcoord/sqlcoord/coord/ids", "jobs": "github.com/sqlcoord/sqlcoord/coord/jobs",
	"txn": "github.com/sqlcoord/sqlcoord/txn", "outbox": "github.com/sqlcoord/sqlcoord/outbox",
	"pgstream": "github.com/sqlcoord/sqlcoord/outbox/pgstream", "saga": "github.com/sqlcoord/sqlcoord/saga",
	"session": "github.com/sqlcoord/sqlcoord/session", "membership": "github.com/sqlcoord/sqlcoord/membership",
	"migrate": "github.com/sqlcoord/sqlcoord/migrate", "pgxv5": "github.com/sqlcoord/sqlcoord/pgxv5",
	"sqlxdriver": "github.com/sqlcoord/sqlcoord/sqlxdriver", "dialects": "github.com/sqlcoord/sqlcoord/dialects",
	"prom": "github.com/sqlcoord/sqlcoord/metrics/prom", "metrics": "github.com/sqlcoord/sqlcoord/metrics",
	"console": "github.com/sqlcoord/sqlcoord/console", "prometheus": "github.com/prometheus/client_golang/prometheus",
}

var (
	snippetVars = regexp.MustCompile(`^<!-- go vars: (.*) -->$`)
	topLevel    = regexp.MustCompile(`(?m)^(func|type) `)
)

// TestDocSnippetsCompile: every ```go block of README.md and docs/*.md
// compiles against this checkout, so the docs cannot name an identifier
// that does not exist (or no longer does). A block is a whole file (it
// has a package clause), top-level declarations, or statements; the
// variables it uses without declaring are declared by a comment line
// right before it: <!-- go vars: ctx context.Context, db *sqlcoord.DB -->.
// Packages come from snippetImports by the name used ("declared and not
// used" is allowed: a snippet shows, it does not use everything).
func TestDocSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every snippet")
	}
	root, _ := os.Getwd()
	files, _ := filepath.Glob("docs/*.md")
	files = append([]string{"README.md"}, files...)
	dir := t.TempDir()
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	require := strings.Replace(string(gomod), "module github.com/sqlcoord/sqlcoord", "module snippets", 1)
	require += fmt.Sprintf("\nrequire github.com/sqlcoord/sqlcoord v1.2.0\n\nreplace github.com/sqlcoord/sqlcoord => %s\n", root)
	write(t, filepath.Join(dir, "go.mod"), require)
	sum, _ := os.ReadFile("go.sum")
	write(t, filepath.Join(dir, "go.sum"), string(sum))
	where := map[string]string{} // package dir → file:line
	n := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```go" {
				continue
			}
			start := i
			var body []string
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				body = append(body, lines[i])
			}
			vars := ""
			if start > 0 {
				if m := snippetVars.FindStringSubmatch(strings.TrimSpace(lines[start-1])); m != nil {
					vars = m[1]
				}
			}
			n++
			pkg := fmt.Sprintf("s%02d", n)
			where[pkg] = fmt.Sprintf("%s:%d", f, start+1)
			write(t, filepath.Join(dir, pkg, "snippet.go"), snippetFile(pkg, vars, strings.Join(body, "\n")))
		}
	}
	if n == 0 {
		t.Fatal("no ```go blocks found")
	}
	refs := inlineRefs(t, files)
	write(t, filepath.Join(dir, "refs", "refs.go"), refsFile(refs))
	where["refs"] = "an identifier in `inline code`"
	cmd := exec.Command("go", "build", "-gcflags=-e", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GONOSUMDB=github.com/sqlcoord", "GOPROXY=off")
	out, _ := cmd.CombinedOutput()
	var bad []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "refs/refs.go") && refExists.MatchString(l) {
			continue // the name exists; it is a type, a generic, or needs a pointer
		}
		if l == "" || strings.HasPrefix(l, "#") || strings.Contains(l, "declared and not used") || strings.Contains(l, "imported and not used") || strings.HasPrefix(l, "go: ") {
			continue
		}
		pkg, rest, _ := strings.Cut(strings.TrimPrefix(l, "./"), "/")
		if w, ok := where[pkg]; ok {
			l = w + " (" + rest + ")"
		}
		bad = append(bad, l)
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d snippet error(s):\n%s", len(bad), strings.Join(bad, "\n"))
	}
	t.Logf("%d snippets compiled, %d identifiers of inline code found", n, len(refs))
}

// snippetFile makes a Go file of a snippet in package pkg.
func snippetFile(pkg, vars, body string) string {
	if strings.HasPrefix(strings.TrimSpace(body), "package ") {
		return regexp.MustCompile(`(?m)^package \w+`).ReplaceAllString(body, "package "+pkg)
	}
	var imports, code []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "import ") {
			imports = append(imports, strings.TrimPrefix(l, "import "))
			continue
		}
		code = append(code, l)
	}
	src := strings.Join(code, "\n")
	uses := regexp.MustCompile(`//.*`).ReplaceAllString(src, "") + " " + vars // comments name packages too
	for name, path := range snippetImports {
		if regexp.MustCompile(`\b`+name+`\.`).MatchString(uses) && !slices.Contains(imports, `"`+path+`"`) && !slices.Contains(imports, name+` "`+path+`"`) {
			imports = append(imports, name+` "`+path+`"`)
		}
	}
	sort.Strings(imports)
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	for _, imp := range imports {
		fmt.Fprintf(&b, "import %s\n", imp)
	}
	if topLevel.MatchString(src) {
		fmt.Fprintf(&b, "\n%s\n", src)
		if vars != "" {
			fmt.Fprintf(&b, "\nvar (\n%s\n)\n", strings.ReplaceAll(vars, ", ", "\n"))
		}
		return b.String()
	}
	fmt.Fprintf(&b, "\nfunc _(%s) {\n%s\n}\n", vars, src)
	return b.String()
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// refPattern is a package-qualified exported name in inline code, with
// an optional method or field: sqlcoord.ErrLocked, outbox.Options.DSN.
var refPattern = regexp.MustCompile(`\b(sqlcoord|coord|jobs|ids|txn|outbox|pgstream|saga|session|membership|migrate|pgxv5|sqlxdriver|dialects|prom|metrics|console)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)

// refExists: a compile error that still says the name exists.
var refExists = regexp.MustCompile(`is not an expression|without instantiation|needs pointer receiver|is not a type`)

// inlineRefs are the package-qualified names in the `inline code` of files
// (outside ```blocks), each once.
func inlineRefs(t *testing.T, files []string) []string {
	seen := map[string]bool{}
	var out []string
	inline := regexp.MustCompile("`[^`]+`")
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		block := false
		for _, l := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				block = !block
				continue
			}
			if block {
				continue
			}
			if filepath.Base(f) == "upgrading.md" && strings.HasPrefix(l, "|") {
				// a table of old → new names: the old ones are gone
				if cells := strings.SplitN(l, "|", 3); len(cells) == 3 {
					l = cells[2]
				}
			}
			for _, code := range inline.FindAllString(l, -1) {
				for _, m := range refPattern.FindAllString(code, -1) {
					if !seen[m] {
						seen[m] = true
						out = append(out, m)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// refsFile refers to every name of refs: pkg.X as a value, pkg.T.M as a
// method or field of a T.
func refsFile(refs []string) string {
	var b, imports strings.Builder
	used := map[string]bool{}
	for _, r := range refs {
		m := refPattern.FindStringSubmatch(r)
		used[m[1]] = true
		if m[3] == "" {
			fmt.Fprintf(&b, "\t_ = %s.%s\n", m[1], m[2])
		} else {
			fmt.Fprintf(&b, "\t_ = func(x %s.%s) { _ = x.%s }\n", m[1], m[2], m[3])
		}
	}
	for name := range used {
		fmt.Fprintf(&imports, "import %s %q\n", name, snippetImports[name])
	}
	return "package refs\n\n" + imports.String() + "\nfunc _() {\n" + b.String() + "}\n"
}

// README's first program is not only built (scripts/install-test.sh
// builds it as a user would): it runs, against a real database, and does
// what it says.
func TestReadmeProgramRuns(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the program")
	}
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(text), "<!-- install-test: main.go -->")
	if !ok {
		t.Fatal("README.md has no install-test program")
	}
	_, after, _ = strings.Cut(after, "```go\n")
	program, _, _ := strings.Cut(after, "```")
	root, _ := os.Getwd()
	dir := t.TempDir()
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod := strings.Replace(string(gomod), "module github.com/sqlcoord/sqlcoord", "module readmeapp", 1)
	mod += fmt.Sprintf("\nrequire github.com/sqlcoord/sqlcoord v1.2.0\n\nreplace github.com/sqlcoord/sqlcoord => %s\n", root)
	write(t, filepath.Join(dir, "go.mod"), mod)
	sum, _ := os.ReadFile("go.sum")
	write(t, filepath.Join(dir, "go.sum"), string(sum))
	write(t, filepath.Join(dir, "main.go"), program)
	env := dbtest.New(t, "postgres")
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GONOSUMDB=github.com/sqlcoord", "GOPROXY=off", "DATABASE_URL="+env.DSN)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "invoice 42 is ours") {
		t.Fatalf("README's program: %v\n%s", err, out)
	}
}
