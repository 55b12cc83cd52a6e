package bench

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var palette = []color.Color{
	color.RGBA{R: 0x33, G: 0x66, B: 0xcc, A: 0xff},
	color.RGBA{R: 0xdc, G: 0x39, B: 0x12, A: 0xff},
	color.RGBA{R: 0x10, G: 0x96, B: 0x18, A: 0xff},
}

// InsertsChart writes a PNG with two grouped bar charts, insert time and
// total size (data + indexes) per key strategy, one bar per dialect.
func InsertsChart(rs []InsertResult, path string) error {
	var strategies, dialects []string
	seenS, seenD := map[string]bool{}, map[string]bool{}
	for _, r := range rs {
		if !seenS[r.Strategy] {
			seenS[r.Strategy] = true
			strategies = append(strategies, r.Strategy)
		}
		if !seenD[r.Dialect] {
			seenD[r.Dialect] = true
			dialects = append(dialects, r.Dialect)
		}
	}
	if len(rs) == 0 {
		return fmt.Errorf("bench: nothing to chart")
	}
	mk := func(title, ylabel string, val func(InsertResult) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		w := vg.Points(14)
		for i, d := range dialects {
			vals := make(plotter.Values, len(strategies))
			for j, s := range strategies {
				for _, r := range rs {
					if r.Dialect == d && r.Strategy == s {
						vals[j] = val(r)
					}
				}
			}
			bars, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			bars.Color = palette[i%len(palette)]
			bars.LineStyle.Width = 0
			bars.Offset = vg.Length(float64(i)-float64(len(dialects)-1)/2) * w
			p.Add(bars)
			p.Legend.Add(d, bars)
		}
		p.Legend.Top = true
		p.NominalX(strategies...)
		p.X.Tick.Label.Rotation = 0.35
		p.X.Tick.Label.XAlign = draw.XRight
		return p, nil
	}
	rows := 0
	if len(rs) > 0 {
		rows = rs[0].Rows
	}
	pt, err := mk(fmt.Sprintf("insert time, %d rows", rows), "seconds", func(r InsertResult) float64 { return r.Elapsed.Seconds() })
	if err != nil {
		return err
	}
	ps, err := mk("size after load (data + indexes)", "MB", func(r InsertResult) float64 { return mb(r.DataBytes + r.IndexBytes) })
	if err != nil {
		return err
	}
	img := vgimg.New(vg.Points(900), vg.Points(900))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{{pt}, {ps}}, tiles, dc)
	pt.Draw(canvases[0][0])
	ps.Draw(canvases[1][0])
	return savePNG(img, path)
}
