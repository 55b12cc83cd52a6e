package console

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
)

// point is one bar of a chart.
type point struct {
	Label string
	Value float64
	Bad   bool // drawn in the failure colour
}

// chart is a server-rendered SVG bar chart (no script: each bar's value
// is in its <title>, which browsers show on hover).
type chart struct {
	Title string
	SVG   template.HTML
	Max   float64
	Empty bool
}

// barChart draws pts left to right on a fixed 720×176 canvas with a max
// label, a baseline, the first and last bars' labels under their ends and
// xAxis (what one bar is) between them.
func barChart(title string, pts []point, unit, xAxis string) chart {
	const w, h, left, top, bottom = 720.0, 176.0, 48.0, 10.0, 36.0
	ch := chart{Title: title, Empty: true}
	for _, p := range pts {
		ch.Max = math.Max(ch.Max, p.Value)
		if p.Value > 0 {
			ch.Empty = false
		}
	}
	scale := ch.Max
	if scale <= 0 {
		scale = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s">`, w, h, w, h, html.EscapeString(title))
	plotH := h - top - bottom
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#8894a6" stroke-width="1"/>`, left, top+plotH, w, top+plotH)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#e2e6ee" stroke-width="1"/>`, left, top, w, top)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" font-size="11" fill="#556">%s</text>`, left-4, top+4, html.EscapeString(num(ch.Max)+unit))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" font-size="11" fill="#556">0</text>`, left-4, top+plotH+4)
	if n := len(pts); n > 0 {
		slot := (w - left) / float64(n)
		bw := math.Max(1, slot*0.8)
		for i, p := range pts {
			bh := plotH * p.Value / scale
			if p.Value > 0 && bh < 1 {
				bh = 1
			}
			fill := "#3b6fd8"
			if p.Bad {
				fill = "#d64545"
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`,
				left+float64(i)*slot+(slot-bw)/2, top+plotH-bh, bw, bh, fill, html.EscapeString(p.Label), html.EscapeString(num(p.Value)+unit))
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" fill="#556">%s</text>`, left, top+plotH+14, html.EscapeString(pts[0].Label))
		if n > 1 {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" font-size="11" fill="#556">%s</text>`, w, top+plotH+14, html.EscapeString(pts[n-1].Label))
		}
	}
	if xAxis != "" {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" font-size="11" fill="#556">%s</text>`, left+(w-left)/2, h-4, html.EscapeString(xAxis))
	}
	b.WriteString(`</svg>`)
	ch.SVG = template.HTML(b.String()) // built above from escaped parts only
	return ch
}

// num prints a value with at most 3 significant decimals.
func num(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}
