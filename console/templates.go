package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
)

var pages = []string{"overview", "leases", "locks", "jobs", "job", "outbox", "keys", "members", "elections", "sagas", "saga", "confirm", "signin"}

func parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"ts":            func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
		"rfc":           func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"secs":          secs,
		"num":           num,
		"abs":           math.Abs,
		"plural":        plural,
		"noun":          noun,
		"internalGroup": internalGroup,
		"bytes":         byteSize,
	}
	out := make(map[string]*template.Template, len(pages))
	for _, p := range pages {
		t, err := template.New(p).Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/jobtable.html", "assets/"+p+".html")
		if err != nil {
			return nil, errs.Errorf("console: template %s: %w", p, err)
		}
		out[p] = t
	}
	return out, nil
}

// byteSize prints a size in bytes the way a person reads it.
func byteSize(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// secs prints a duration in seconds the way a person reads it.
func secs(s float64) string {
	neg := s < 0
	s = math.Abs(s)
	var out string
	switch {
	case s < 1:
		out = fmt.Sprintf("%d ms", int(s*1000))
	case s < 60:
		out = fmt.Sprintf("%.1f s", s)
	case s < 3600:
		out = fmt.Sprintf("%dm %02ds", int(s)/60, int(s)%60)
	case s < 86400:
		out = fmt.Sprintf("%dh %02dm", int(s)/3600, int(s)%3600/60)
	default:
		out = fmt.Sprintf("%dd %02dh", int(s)/86400, int(s)%86400/3600)
	}
	if neg {
		return "−" + out
	}
	return out
}

// internalGroup explains a membership group sqlcoord keeps for itself
// ("" for an application's group).
func internalGroup(name string) string {
	switch name {
	case "sqlcoord.outbox.listeners":
		return "sqlcoord's own: outbox relays listening for NOTIFY (Enqueue notifies only while one is listed here)"
	}
	if strings.HasPrefix(name, "sqlcoord.") {
		return "sqlcoord's own"
	}
	return ""
}

// plural is "1 row" or "2 rows" (n any integer).
func plural(n any, one, many string) string {
	if fmt.Sprint(n) == "1" {
		return "1 " + one
	}
	return fmt.Sprint(n) + " " + many
}

// noun is one for 1 and many otherwise: a card's label under its number.
func noun(n any, one, many string) string {
	if fmt.Sprint(n) == "1" {
		return one
	}
	return many
}
