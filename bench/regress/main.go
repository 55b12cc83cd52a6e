// Command regress measures this working tree against the previous release
// in the same run: it builds both CLIs (the release from its recorded
// commit, see RELEASES), starts throwaway PostgreSQL and MariaDB servers
// with fsync on, and runs `sqlcoord bench primitives` and `bench
// leasewait` with each binary in turn — rounds alternate which goes first,
// each run on a database of its own migrated by that binary — then prints
// head ÷ previous per case with the range over rounds. With the suite
// latency it also builds bench/peers of both trees and compares the
// relays' commit→delivery p50 and p99 (PostgreSQL: the polling and the
// streaming relay; MariaDB: the polling relay) at the offered rates. A case measured
// beside a baseline (the same work by hand) is also compared through its
// ratio to that baseline, which cancels the machine's drift between the
// two runs; the baselines themselves (the same SQL in both binaries) give
// the noise floor. A case below 0.95× — or the floor, if lower — in every
// round is named.
//
// Run: make bench-regress (ARGS="-rounds 3 -prev v1.0.0 -groups locks").
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sqlcoord/sqlcoord/bench"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

var (
	prev     = flag.String("prev", "", "the previous release: a version listed in RELEASES (default: the newest) or a commit")
	rounds   = flag.Int("rounds", 2, "interleaved rounds (each runs both binaries on both dialects)")
	groups   = flag.String("groups", "locks,idempotency,ids,jobs,outbox,saga", "bench primitives groups")
	clients  = flag.String("clients", "8", "concurrent clients, comma-separated")
	duration = flag.Duration("duration", 3*time.Second, "measuring time per case")
	dialects = flag.String("dialects", "postgres,mysql", "families to run on")
	outPath  = flag.String("out", "", "also write the report (markdown) here")
	slower   = flag.Float64("threshold", 0.95, "a case below this head ÷ previous in every round is named a regression")
	suites   = flag.String("suites", "primitives,leasewait,latency", "what to compare: primitives (bench primitives throughput), leasewait (lease hand-off latency), latency (the relays' commit→delivery, bench/peers)")
	latRates = flag.String("latency-rates", "100,1000", "latency: offered rates (msgs/s)")
	handoffs = flag.Int("handoffs", 1000, "leasewait: hand-offs per case (p99 of a few hundred is mostly the start)")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	root, err := repoRoot()
	if err != nil {
		fail(err)
	}
	version, commit, err := release(root, *prev)
	if err != nil {
		fail(err)
	}
	work, err := os.MkdirTemp("", "sqlcoord-regress")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(work)
	fmt.Fprintf(os.Stderr, "regress: building the previous release %s (%s) and the working tree\n", version, commit)
	prevBin, prevPeers, err := buildAt(ctx, root, work, commit)
	if err != nil {
		fail(err)
	}
	headBin, headPeers := filepath.Join(work, "sqlcoord-head"), filepath.Join(work, "peers-head")
	if err := run(ctx, filepath.Join(root, "cmd", "sqlcoord"), "go", "build", "-tags", "bench,full", "-o", headBin, "."); err != nil {
		fail(err)
	}
	if err := run(ctx, filepath.Join(root, "bench", "peers"), "go", "build", "-o", headPeers, "."); err != nil {
		fail(err)
	}
	os.Setenv("SQLCOORD_PG_ARGS", "-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c shared_preload_libraries=pg_stat_statements")
	os.Setenv("SQLCOORD_MYSQL_ARGS", "--innodb-flush-log-at-trx-commit=1")
	type key struct{ dialect, group, name string }
	// per case and round: head ÷ previous, and — for a case measured
	// beside a baseline in the same run — its ratio to the baseline in
	// the head's run ÷ the same in the previous release's run, which
	// cancels the machine's drift between the two runs
	ratios := map[key][]float64{}
	normalized := map[key][]float64{}
	controls := map[key]bool{} // baselines: the same SQL in both binaries
	var order []key
	var notes []string
	// collect adds one round's head ÷ previous of every case both ran.
	collect := func(got map[string]map[key]bench.Result, r int) {
		for k, h := range got["head"] {
			p, ok := got["previous"][k]
			if !ok || p.OpsPerS <= 0 || h.OpsPerS <= 0 {
				continue
			}
			if _, seen := ratios[k]; !seen {
				order = append(order, k)
			}
			ratios[k] = append(ratios[k], h.OpsPerS/p.OpsPerS)
			if h.Baseline != "" && h.Baseline == p.Baseline && h.Ratio > 0 && p.Ratio > 0 {
				normalized[k] = append(normalized[k], h.Ratio/p.Ratio)
			}
		}
		for k := range got["previous"] {
			if _, ok := got["head"][k]; !ok && r == 0 {
				notes = append(notes, fmt.Sprintf("%s %s %q: only in the previous release", k.dialect, k.group, k.name))
			}
		}
	}
	if strings.Contains(*suites, "latency") {
		// The relays' commit→delivery: bench/peers of each tree, its
		// sqlcoord relays only, one paced round per binary and dialect
		// (each run starts its own throwaway servers).
		for r := 0; r < *rounds; r++ {
			bins := []struct{ name, path string }{{"previous", prevPeers}, {"head", headPeers}}
			if r%2 == 1 {
				bins[0], bins[1] = bins[1], bins[0]
			}
			got := map[string]map[key]bench.Result{}
			for _, b := range bins {
				got[b.name] = map[key]bench.Result{}
				for _, fam := range strings.Split(*dialects, ",") {
					rows, err := latency(ctx, b.path, fam)
					if err != nil {
						fail(fmt.Errorf("%s latency on %s: %w", b.name, fam, err))
					}
					for _, x := range rows {
						for _, m := range []struct {
							name string
							v    time.Duration
						}{{"p50", x.p50}, {"p99", x.p99}} {
							if m.v <= 0 {
								continue
							}
							got[b.name][key{fam, "commit→delivery", fmt.Sprintf("%s at %d/s, %s (1/latency)", x.system, x.rate, m.name)}] = bench.Result{OpsPerS: float64(time.Second) / float64(m.v)}
						}
					}
				}
			}
			collect(got, r)
		}
	}
	for _, fam := range strings.Split(*dialects, ",") {
		if !strings.Contains(*suites, "primitives") && !strings.Contains(*suites, "leasewait") {
			break
		}
		srv, err := localdb.Start(ctx, fam)
		if err != nil {
			fail(err)
		}
		for r := 0; r < *rounds; r++ {
			bins := []struct{ name, path string }{{"previous", prevBin}, {"head", headBin}}
			if r%2 == 1 {
				bins[0], bins[1] = bins[1], bins[0]
			}
			got := map[string]map[key]bench.Result{}
			for _, b := range bins {
				db := fmt.Sprintf("regress_%s_%d", b.name, r)
				dsn, err := srv.CreateDatabase(ctx, db)
				if err != nil {
					fail(err)
				}
				got[b.name] = map[key]bench.Result{}
				if strings.Contains(*suites, "primitives") {
					res, err := primitives(ctx, b.path, dsn, filepath.Join(work, db))
					if err != nil {
						fail(fmt.Errorf("%s on %s: %w", b.name, fam, err))
					}
					for _, x := range res {
						got[b.name][key{x.Dialect, x.Group, fmt.Sprintf("%s, %d clients", x.Case, x.Clients)}] = x
						if x.Baseline != "" {
							controls[key{x.Dialect, x.Group, fmt.Sprintf("%s, %d clients", x.Baseline, x.Clients)}] = true
						}
					}
				}
				if strings.Contains(*suites, "leasewait") {
					rows, err := leaseWait(ctx, b.path, dsn, filepath.Join(work, db+"-lw"))
					if err != nil {
						fail(fmt.Errorf("%s leasewait on %s: %w", b.name, fam, err))
					}
					for _, x := range rows {
						if x.P50 <= 0 || x.P99 <= 0 {
							continue
						}
						// latency: a speed figure (1/latency), so that head ÷
						// previous above 1 is better, as for throughput
						for _, m := range []struct {
							name string
							v    time.Duration
						}{{"p50", x.P50}, {"p99", x.P99}} {
							got[b.name][key{x.Dialect, "hand-off", fmt.Sprintf("%s, %d waiters, %s (1/latency)", x.Mode, x.Waiters, m.name)}] = bench.Result{OpsPerS: float64(time.Second) / float64(m.v)}
						}
					}
				}
				srv.DropDatabase(ctx, db)
			}
			collect(got, r)
		}
		srv.Stop()
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].dialect != order[j].dialect {
			return order[i].dialect < order[j].dialect
		}
		if order[i].group != order[j].group {
			return order[i].group < order[j].group
		}
		return order[i].name < order[j].name
	})
	// The noise of each dialect's runs: the lowest round of any control
	// (a baseline — hand-written SQL, the same in both binaries, whose
	// ratio would be 1.00 on a quiet machine).
	floor := map[string]float64{}
	for _, k := range order {
		if !controls[k] {
			continue
		}
		lo := slices.Min(ratios[k])
		if f, ok := floor[k.dialect]; !ok || lo < f {
			floor[k.dialect] = lo
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Regression: the working tree ÷ %s (%s)\n\n", version, commit)
	fmt.Fprintf(&b, "`make bench-regress ARGS=\"-rounds %d -groups %s -clients %s -duration %v\"`: both CLIs' `bench primitives` and `bench leasewait` (%d hand-offs) on the same throwaway servers (fsync on), %d rounds alternating which goes first, a fresh database each; the relays' commit→delivery by each tree's bench/peers (32 producers, one message per transaction, paced at %s msgs/s, 6 s per rate, servers of its own).\n\n",
		*rounds, *groups, *clients, *duration, *handoffs, *rounds, *latRates)
	b.WriteString("- **head ÷ previous**: throughput (latency as 1/latency: above 1 is better), median of the rounds and their range.\n")
	b.WriteString("- **÷ baseline, head ÷ previous**: for a case measured beside the same work by hand, its ratio to that baseline in the head's run ÷ the same ratio in the previous release's run: the machine's drift between the two runs cancels.\n")
	b.WriteString("- **control**: a baseline itself — the same SQL in both binaries; the lowest round of any control is the run's noise floor.\n\n")
	for _, d := range sortedKeys(floor) {
		fmt.Fprintf(&b, "Noise floor %s: %.2f.\n", d, floor[d])
	}
	b.WriteString("\n| dialect | group | case | head ÷ previous | range | ÷ baseline, head ÷ previous | range | |\n|---|---|---|---:|---|---:|---|---|\n")
	var regressions []string
	for _, k := range order {
		rs := append([]float64(nil), ratios[k]...)
		sort.Float64s(rs)
		med := rs[len(rs)/2]
		judged := rs
		norm, nrange := "", ""
		if ns := append([]float64(nil), normalized[k]...); len(ns) > 0 {
			sort.Float64s(ns)
			norm, nrange = fmt.Sprintf("%.2f", ns[len(ns)/2]), fmt.Sprintf("%.2f–%.2f", ns[0], ns[len(ns)-1])
			judged = ns
		}
		bar := *slower
		if f, ok := floor[k.dialect]; ok && f < bar {
			bar = f
		}
		verdict := ""
		switch {
		case controls[k]:
			verdict = "control"
		case judged[len(judged)-1] < bar:
			verdict = "**slower**"
			regressions = append(regressions, fmt.Sprintf("%s %s %s: %.2f× (every round below %.2f)", k.dialect, k.group, k.name, judged[len(judged)/2], bar))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %.2f–%.2f | %s | %s | %s |\n", k.dialect, k.group, k.name, med, rs[0], rs[len(rs)-1], norm, nrange, verdict)
	}
	if len(regressions) == 0 {
		fmt.Fprintf(&b, "\nNo case below %.2f× (or its dialect's noise floor, if lower) in every round.\n", *slower)
	} else {
		fmt.Fprintf(&b, "\nBelow %.2f× (or the noise floor, if lower) in every round, judged on the ratio to the baseline where there is one:\n\n", *slower)
		for _, r := range regressions {
			fmt.Fprintf(&b, "- %s\n", r)
		}
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\n%s", n)
	}
	fmt.Print(b.String())
	if *outPath != "" {
		if err := os.WriteFile(*outPath, []byte(b.String()), 0o644); err != nil {
			fail(err)
		}
	}
}

func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// primitives runs `bin bench primitives` against dsn and reads its JSON.
func primitives(ctx context.Context, bin, dsn, out string) ([]bench.Result, error) {
	args := []string{"bench", "primitives", "--dsn", dsn, "--groups", *groups, "--clients", *clients, "--duration", duration.String(), "--out", out}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SQLCOORD_DSN=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%v\n%s", err, tail(string(b), 20))
	}
	data, err := os.ReadFile(filepath.Join(out, "primitives.json"))
	if err != nil {
		return nil, err
	}
	var rs []bench.Result
	if err := json.Unmarshal(data, &rs); err != nil {
		return nil, err
	}
	return rs, nil
}

// leaseWait runs `bin bench leasewait` against dsn and reads its JSON.
func leaseWait(ctx context.Context, bin, dsn, out string) ([]bench.LeaseWaitRow, error) {
	args := []string{"bench", "leasewait", "--dsn", dsn, "--waiters", "1,32", "--handoffs", strconv.Itoa(*handoffs), "--out", out}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SQLCOORD_DSN=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%v\n%s", err, tail(string(b), 20))
	}
	data, err := os.ReadFile(filepath.Join(out, "leasewait.json"))
	if err != nil {
		return nil, err
	}
	var rs []bench.LeaseWaitRow
	if err := json.Unmarshal(data, &rs); err != nil {
		return nil, err
	}
	return rs, nil
}

// release resolves want (a version in RELEASES, "" for the newest, or a
// commit) to its version and commit.
func release(root, want string) (string, string, error) {
	f, err := os.Open(filepath.Join(root, "RELEASES"))
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	var last [2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		if want != "" && (fs[0] == want || "v"+fs[0] == want || strings.TrimPrefix(want, "v") == fs[0]) {
			return fs[0], fs[1], nil
		}
		last = [2]string{fs[0], fs[1]}
	}
	if want != "" {
		return want, want, nil // a commit
	}
	if last[1] == "" {
		return "", "", errors.New("RELEASES lists no release")
	}
	return last[0], last[1], nil
}

// buildAt builds the CLI (with benchmarks) and bench/peers of commit in a
// worktree.
func buildAt(ctx context.Context, root, work, commit string) (cli, peers string, err error) {
	tree := filepath.Join(work, "prev")
	if err := run(ctx, root, "git", "worktree", "add", "--detach", tree, commit); err != nil {
		return "", "", err
	}
	defer run(context.Background(), root, "git", "worktree", "remove", "--force", tree)
	cli, peers = filepath.Join(work, "sqlcoord-prev"), filepath.Join(work, "peers-prev")
	if err := run(ctx, filepath.Join(tree, "cmd", "sqlcoord"), "go", "build", "-tags", "bench,full", "-o", cli, "."); err != nil {
		return "", "", err
	}
	return cli, peers, run(ctx, filepath.Join(tree, "bench", "peers"), "go", "build", "-o", peers, ".")
}

// latencyRow is one relay's commit→delivery at one offered rate.
type latencyRow struct {
	system   string
	rate     int
	p50, p99 time.Duration
}

// latencyLine is bench/peers' line per case, rate and round.
var latencyLine = regexp.MustCompile(`^\s*(sqlcoord, [^:]*?)\s+at\s+(\d+)/s: p50\s+([\d.]+) p90\s+[\d.]+ p99\s+([\d.]+) ms`)

// latency runs bench/peers' commit→delivery comparison (the sqlcoord
// relays only, one round) for family and reads its per-round lines.
func latency(ctx context.Context, bin, family string) ([]latencyRow, error) {
	only := "latency"
	if family == "mysql" {
		only = "latency-mariadb"
	}
	cmd := exec.CommandContext(ctx, bin, "-only", only, "-cases", "1 polling relay,1 streaming relay", "-rates", *latRates, "-rounds", "1", "-duration", "2s")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%v\n%s", err, tail(string(out), 20))
	}
	var rows []latencyRow
	for _, line := range strings.Split(string(out), "\n") {
		m := latencyLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rate, _ := strconv.Atoi(m[2])
		p50, _ := strconv.ParseFloat(m[3], 64)
		p99, _ := strconv.ParseFloat(m[4], 64)
		// A p50 of 0: most messages were delivered before the producer's
		// COMMIT returned (MariaDB at a low rate); nothing to compare.
		rows = append(rows, latencyRow{system: m[1], rate: rate, p50: time.Duration(p50 * float64(time.Millisecond)), p99: time.Duration(p99 * float64(time.Millisecond))})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no latency line in its output:\n%s", tail(string(out), 20))
	}
	return rows, nil
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(string(out), 20))
	}
	return nil
}

func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	return strings.TrimSpace(string(out)), err
}

func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "regress:", err)
	os.Exit(1)
}
