package bench

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// The chart is hand-written SVG in one self-contained HTML page (plus each
// SVG on its own, for docs): a few bars need no plotting library, and the
// page opens anywhere without fetching anything.

var modeColor = map[Mode]string{
	ModeSync:     "#8c8c8c",
	ModeChannel:  "#1f77b4",
	ModeStream:   "#ff7f0e",
	ModeCeiling:  "#2ca02c",
	ModeNoop:     "#17becf",
	ModePerOrder: "#8c564b",
	ModeBatched:  "#9467bd",
}

type bar struct {
	label string
	value float64
	text  string
	color string
}

type barGroup struct {
	title string
	bars  []bar
}

const (
	chartWidth  = 860
	labelWidth  = 190
	valueWidth  = 110
	barHeight   = 16
	barGap      = 4
	groupHeader = 24
	chartTop    = 40
)

// hbars draws horizontal bars, grouped; log scales the axis for values
// that span orders of magnitude (latencies).
func hbars(title, subtitle string, groups []barGroup, log bool) string {
	var maxV, minV float64 = 0, math.MaxFloat64
	rows := 0
	for _, g := range groups {
		for _, b := range g.bars {
			maxV = max(maxV, b.value)
			if b.value > 0 {
				minV = min(minV, b.value)
			}
		}
		rows += len(g.bars)
	}
	height := chartTop + len(groups)*groupHeader + rows*(barHeight+barGap) + 20
	span := float64(chartWidth - labelWidth - valueWidth)
	scale := func(v float64) float64 {
		if maxV <= 0 || v <= 0 {
			return 0
		}
		if !log {
			return v / maxV * span
		}
		lo := math.Log10(minV) - 0.3
		return max(2, (math.Log10(v)-lo)/(math.Log10(maxV)-lo)*span)
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`,
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`)
	fmt.Fprintf(&s, `<text x="10" y="18" font-size="15" font-weight="bold">%s</text>`, html.EscapeString(title))
	fmt.Fprintf(&s, `<text x="10" y="33" fill="#555">%s</text>`, html.EscapeString(subtitle))
	y := chartTop
	for _, g := range groups {
		y += groupHeader
		fmt.Fprintf(&s, `<text x="10" y="%d" font-weight="bold">%s</text>`, y-7, html.EscapeString(g.title))
		fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>`, labelWidth, y-4, chartWidth-valueWidth, y-4)
		for _, b := range g.bars {
			w := scale(b.value)
			fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="end">%s</text>`, labelWidth-8, y+barHeight-4, html.EscapeString(b.label))
			fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`, labelWidth, y, w, barHeight, b.color)
			fmt.Fprintf(&s, `<text x="%.1f" y="%d">%s</text>`, float64(labelWidth)+w+5, y+barHeight-4, html.EscapeString(b.text))
			y += barHeight + barGap
		}
	}
	s.WriteString(`</svg>`)
	return s.String()
}

func (rep *Report) charts() map[string]string {
	scenarios := []Scenario{ScenarioHot, ScenarioWide, ScenarioCrash, ScenarioFulfil}
	var claims, lat, orders []barGroup
	for _, sc := range scenarios {
		var cg, lg, og barGroup
		cg.title, lg.title, og.title = string(sc), string(sc), string(sc)
		for _, r := range rep.representative() {
			if r.Scenario != sc || !r.ok() {
				continue
			}
			c := modeColor[r.Mode]
			if r.HasClaims {
				cg.bars = append(cg.bars, bar{string(r.Mode), r.ClaimsPerSec, fmt.Sprintf("%.0f /s", r.ClaimsPerSec), c})
				for _, p := range []struct {
					name string
					v    float64
					fade string
				}{{"p50", r.Latency.P50, "ff"}, {"p99", r.Latency.P99, "b0"}, {"p99.9", r.Latency.P999, "70"}, {"max", r.Latency.Max, "40"}} {
					lg.bars = append(lg.bars, bar{string(r.Mode) + " " + p.name, p.v, ms(p.v), c + p.fade})
				}
			}
			if r.HasDrain && r.OrdersPerSec > 0 {
				og.bars = append(og.bars, bar{string(r.Mode), r.OrdersPerSec, fmt.Sprintf("%.0f /s", r.OrdersPerSec), c})
			}
		}
		for _, g := range []struct {
			dst *[]barGroup
			g   barGroup
		}{{&claims, cg}, {&lat, lg}, {&orders, og}} {
			if len(g.g.bars) > 0 {
				*g.dst = append(*g.dst, g.g)
			}
		}
	}
	m := rep.Machine
	sub := fmt.Sprintf("%d cores, %s, %s, %s", m.Cores, m.Redis, m.MySQL, rep.Started.Format("2006-01-02"))
	out := map[string]string{}
	if len(claims) > 0 {
		out["claims.svg"] = hbars("Claims per second (higher is better)", sub, claims, false)
	}
	if len(lat) > 0 {
		out["latency.svg"] = hbars("Claim latency percentiles (lower is better, log scale)", sub, lat, true)
	}
	if len(orders) > 0 {
		out["orders.svg"] = hbars("Orders per second into MySQL (higher is better)", sub, orders, false)
	}
	return out
}

// WriteChart writes bench.html (the charts and the table in one page) and
// each chart as an SVG file into dir.
func (rep *Report) WriteChart(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	charts := rep.charts()
	var page strings.Builder
	page.WriteString("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>seckill-bench</title>\n" +
		"<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}" +
		"td:first-child,td:nth-child(2){text-align:left}pre{background:#f6f6f6;padding:1em}</style></head><body>\n<h1>seckill-bench</h1>\n")
	for _, w := range rep.Warnings {
		fmt.Fprintf(&page, "<p><strong>%s</strong></p>\n", html.EscapeString(w))
	}
	for _, name := range []string{"claims.svg", "latency.svg", "orders.svg"} {
		svg, ok := charts[name]
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(svg+"\n"), 0o644); err != nil {
			return err
		}
		page.WriteString("<p>" + svg + "</p>\n")
	}
	var table strings.Builder
	rep.WriteTable(&table)
	page.WriteString("<pre>" + html.EscapeString(table.String()) + "</pre>\n</body></html>\n")
	return os.WriteFile(filepath.Join(dir, "bench.html"), []byte(page.String()), 0o644)
}
