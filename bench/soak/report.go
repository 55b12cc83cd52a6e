package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// write saves soak.json, soak.md and soak.png in dir; ok: every dialect
// passed.
func write(dir string, cfg config, reps []*report) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	js, _ := json.MarshalIndent(reps, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "soak.json"), js, 0o644); err != nil {
		return false, err
	}
	if err := chart(reps, filepath.Join(dir, "soak.png")); err != nil {
		return false, err
	}
	ok := true
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# sqlcoord soak\n\n%s, host %s; load %v at %d orders/s per dialect (each an order row, its outbox message and its idempotency key); SIGKILL every %v, SIGSTOP every %v, database restart every %v; a sample every %v; outbox %s; keys %s\n\n",
		time.Now().UTC().Format(time.RFC3339), host, cfg.dur, cfg.rate, cfg.killEvery, cfg.stopEvery, cfg.restartEvery, cfg.sample, partitioned(cfg.partSize > 0, fmt.Sprintf("partitioned, %d ids a partition", cfg.partSize)), partitioned(cfg.keyPeriod > 0, fmt.Sprintf("partitioned, a partition per %v", cfg.keyPeriod)))
	for _, r := range reps {
		verdict := "PASSED"
		if r.Failed {
			verdict, ok = "FAILED", false
		}
		fmt.Fprintf(&b, "## %s: %s\n\nServer: %s (throwaway server; durability as the test harness starts it)\n\n", r.Dialect, verdict, r.Settings)
		if r.Err != "" {
			fmt.Fprintf(&b, "Error: %s\n\n", r.Err)
		}
		b.WriteString("| invariant | result |\n|---|---|\n")
		for _, k := range sortedKeys(r.Invariants) {
			fmt.Fprintf(&b, "| %s | %s |\n", k, r.Invariants[k])
		}
		b.WriteString("\n| series | verdict |\n|---|---|\n")
		for _, k := range sortedKeys(r.Growth) {
			fmt.Fprintf(&b, "| %s | %s |\n", k, r.Growth[k])
		}
		fmt.Fprintf(&b, "\nFaults (%d):\n\n", len(r.Events))
		for _, e := range r.Events {
			fmt.Fprintf(&b, "- %s\n", e)
		}
		b.WriteString("\n")
	}
	b.WriteString("![the series, every sample](soak.png)\n")
	if err := os.WriteFile(filepath.Join(dir, "soak.md"), []byte(b.String()), 0o644); err != nil {
		return false, err
	}
	fmt.Printf("\n%s\nwrote %s, soak.json and soak.png\n", b.String(), filepath.Join(dir, "soak.md"))
	return ok, nil
}

func partitioned(on bool, how string) string {
	if on {
		return how
	}
	return "plain (row-by-row cleanup)"
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var colors = []color.Color{
	color.RGBA{R: 0x33, G: 0x66, B: 0xcc, A: 0xff}, color.RGBA{R: 0xdc, G: 0x39, B: 0x12, A: 0xff},
	color.RGBA{R: 0x10, G: 0x96, B: 0x18, A: 0xff}, color.RGBA{R: 0x99, G: 0x00, B: 0x99, A: 0xff},
	color.RGBA{R: 0xff, G: 0x99, B: 0x00, A: 0xff}, color.RGBA{R: 0x00, G: 0x99, B: 0xc6, A: 0xff},
}

// chart draws one column per dialect and one row per panel.
func chart(reps []*report, path string) error {
	type line struct {
		name string
		f    func(sample) float64
	}
	panels := []struct {
		title string
		lines []line
	}{
		{"throughput (per s)", []line{{"orders enqueued", func(s sample) float64 { return s.OrdersPerS }}, {"delivered", func(s sample) float64 { return s.DeliveredPerS }}}},
		{"enqueue latency (ms)", []line{{"p50", func(s sample) float64 { return s.EnqueueP50ms }}, {"p99", func(s sample) float64 { return s.EnqueueP99ms }}}},
		{"goroutines", []line{{"this process", func(s sample) float64 { return float64(s.Goroutines) }}, {"relays, streamers, schedulers", func(s sample) float64 { return float64(s.ChildGoroutines) }}}},
		{"heap in use (MB)", []line{{"this process", func(s sample) float64 { return s.HeapMB }}, {"relays, streamers, schedulers", func(s sample) float64 { return s.ChildHeapMB }}}},
		{"connections", []line{{"pool (this process)", func(s sample) float64 { return float64(s.PoolConns) }}, {"server (all)", func(s sample) float64 { return float64(s.ServerConns) }}}},
		{"tables + indexes (MB)", nil},
		{"dead tuples / history list / purge lag", []line{{"PG dead tuples (coord_)", func(s sample) float64 { return float64(s.DeadTuples) }}, {"MariaDB history list", func(s sample) float64 { return float64(s.HistoryLength) }}, {"MariaDB purge lag (trx)", func(s sample) float64 { return float64(s.PurgeLag) }}, {"PG autovacuums ×1000", func(s sample) float64 { return float64(s.Autovacuums) * 1000 }}, {"PG oldest xmin age (trx)", func(s sample) float64 { return float64(s.OldestXminAge) }}}},
		{"WAL retained by the stream slot (MB, PostgreSQL)", []line{{"slot", func(s sample) float64 { return s.SlotMB }}}},
		{"WAL / redo per order (bytes)", []line{{"log bytes per order", func(s sample) float64 { return s.LogPerOrder }}}},
		{"relay lag (s)", []line{{"oldest pending message", func(s sample) float64 { return s.RelayLagS }}}},
	}
	for _, t := range tables {
		panels[5].lines = append(panels[5].lines, line{t, func(s sample) float64 { return s.TableMB[t] }})
	}
	if len(reps) == 0 {
		return fmt.Errorf("soak: nothing to chart")
	}
	grid := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		for _, r := range reps {
			p := plot.New()
			p.Title.Text = r.Dialect + ": " + pn.title
			p.X.Label.Text = "minutes"
			p.Legend.Top, p.Legend.Left = true, true
			for j, l := range pn.lines {
				var xy plotter.XYs
				for _, s := range r.Samples {
					xy = append(xy, plotter.XY{X: s.At / 60, Y: l.f(s)})
				}
				if len(xy) == 0 {
					continue
				}
				ln, err := plotter.NewLine(xy)
				if err != nil {
					return err
				}
				ln.Color = colors[j%len(colors)]
				p.Add(ln)
				p.Legend.Add(l.name, ln)
			}
			p.Y.Min = 0
			grid[i] = append(grid[i], p)
		}
	}
	img := vgimg.New(vg.Points(float64(520*len(reps))), vg.Points(float64(260*len(panels))))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: len(reps), PadX: vg.Points(16), PadY: vg.Points(16), PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	return err
}
