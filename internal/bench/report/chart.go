package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/queengate/queengate/internal/bench"
)

// Chart layout, in SVG user units (pixels at 100% zoom). The panels are
// stacked so that target names and values get the full width.
const (
	chartWidth  = 900
	chartMargin = 20
	plotLeft    = 170 // target names end here
	plotRight   = 790 // leaves room for a value printed past its bar
	labelRunes  = 22  // longer target names are cut

	subtitleSize = 11.5 // font size of the line under the title

	throughputRow = 28 // height of a target's row in the throughput panel
	throughputBar = 18
	latencyBar    = 10                    // height of one percentile's bar
	latencyRow    = 3*latencyBar + 2 + 14 // a target's group of three bars
)

// The palette is Okabe and Ito's, which stays distinguishable under the
// common colour-vision deficiencies. Only queengate gets a saturated hue, so
// it stands out however many targets there are.
const (
	colourQueengate = "#D55E00" // vermillion
	colourTarget    = "#B3B3B3"
	colourBand      = "#FCEBE1" // behind queengate's rows
	colourInk       = "#222222"
	colourMuted     = "#666666"
	colourGrid      = "#DDDDDD"
	colourWhisker   = "#000000"
)

// percentiles are the latency bars of each target. Their blues (from
// ColorBrewer) differ in lightness, so they read without seeing hue.
var percentiles = []struct {
	name   string
	colour string
	of     func(bench.Result) time.Duration
}{
	{"p50", "#9ECAE1", func(r bench.Result) time.Duration { return r.P50 }},
	{"p90", "#4292C6", func(r bench.Result) time.Duration { return r.P90 }},
	{"p99", "#08519C", func(r bench.Result) time.Duration { return r.P99 }},
}

// chartRow is one target as drawn: every value is finite and not negative.
type chartRow struct {
	label     string
	queengate bool
	rate      float64    // median msg/s
	low, high float64    // min and max msg/s over the rounds
	latency   [3]float64 // ms, in the order of percentiles
}

// WriteChartSVG writes r as a self-contained SVG image (no fonts, scripts
// or style sheets to fetch) with a throughput panel above a latency panel,
// so a run can be pasted into a README or an issue as it is.
func WriteChartSVG(w io.Writer, r *bench.Report) error {
	rows := chartRows(r)
	var c canvas
	title := "queenbench"
	if r.Workload.Scenario != "" {
		title += " — scenario " + r.Workload.Scenario
	}
	y := 28.0
	c.text(chartMargin, y, title, `font-size="17" font-weight="bold"`)
	// The subtitle takes a second line when one would run off the image.
	subtitle := []string{workloadDetails(r.Workload)}
	if r.Machine != "" {
		subtitle = []string{r.Machine, subtitle[0]}
		if line := r.Machine + " · " + subtitle[1]; textWidth(line, subtitleSize) <= chartWidth-2*chartMargin {
			subtitle = []string{line}
		}
	}
	for _, line := range subtitle {
		y += 19
		c.text(chartMargin, y, line, `font-size="`+num(subtitleSize)+`" fill="`+colourMuted+`"`)
	}

	y = c.throughputPanel(y+24, rows, throughputTitle(r))
	y = c.latencyPanel(y+28, rows)
	height := y + chartMargin

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%s" viewBox="0 0 %d %s" font-family="Helvetica, Arial, sans-serif" fill="%s">`+"\n",
		chartWidth, num(height), chartWidth, num(height), colourInk)
	b.WriteString(`<rect width="100%" height="100%" fill="#FFFFFF"/>` + "\n")
	b.Write(c.Bytes())
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// chartRows returns the rows to draw, queengate first. They are the
// medians with min–max whiskers over each target's rounds, or every round
// on its own when the run computed no medians.
func chartRows(r *bench.Report) []chartRow {
	perRound := len(r.Medians) == 0
	var rows []chartRow
	for _, m := range reportRows(r) {
		row := chartRow{
			label:     m.Target,
			queengate: strings.HasPrefix(m.Target, "queengate"),
			rate:      finite(m.Throughput),
		}
		for i, p := range percentiles {
			row.latency[i] = finite(float64(p.of(m)) / float64(time.Millisecond))
		}
		row.low, row.high = row.rate, row.rate
		if perRound {
			row.label = fmt.Sprintf("%s #%d", m.Target, m.Round)
		} else {
			for _, res := range r.Results {
				if res.Target == m.Target && res.Scenario == m.Scenario {
					row.low = min(row.low, finite(res.Throughput))
					row.high = max(row.high, finite(res.Throughput))
				}
			}
		}
		rows = append(rows, row)
	}
	slices.SortStableFunc(rows, func(a, b chartRow) int {
		switch {
		case a.queengate && !b.queengate:
			return -1
		case b.queengate && !a.queengate:
			return 1
		}
		return 0
	})
	return rows
}

// throughputTitle titles the throughput panel with what its bars are.
func throughputTitle(r *bench.Report) string {
	switch n := roundCount(r); {
	case len(r.Medians) == 0:
		return "Throughput (msg/s, per round)"
	case n == 1:
		return "Throughput (msg/s, median of 1 round)"
	case n > 1:
		return fmt.Sprintf("Throughput (msg/s, median of %d rounds)", n)
	}
	return "Throughput (msg/s, median)"
}

// canvas collects the elements of an SVG image.
type canvas struct {
	bytes.Buffer
}

// throughputPanel draws one bar per target on a linear axis from zero, with
// a whisker from the slowest to the fastest round. It returns the y below
// the panel.
func (c *canvas) throughputPanel(top float64, rows []chartRow, title string) float64 {
	c.text(chartMargin, top+14, title, `font-size="14" font-weight="bold"`)
	barsTop := top + 28
	axisY := barsTop + float64(len(rows))*throughputRow

	highest := 0.0
	for _, row := range rows {
		highest = max(highest, row.high)
	}
	ticks := niceTicks(highest, 5)
	axisMax := ticks[len(ticks)-1]
	x := func(v float64) float64 { return plotLeft + v/axisMax*(plotRight-plotLeft) }

	for i, row := range rows {
		c.rowBand(row, barsTop+float64(i)*throughputRow, throughputRow)
	}
	for _, t := range ticks {
		c.line(x(t), barsTop-4, x(t), axisY, colourGrid, 1)
		c.text(x(t), axisY+15, formatTick(t), `font-size="11" text-anchor="middle" fill="`+colourMuted+`"`)
	}
	for i, row := range rows {
		mid := barsTop + (float64(i)+0.5)*throughputRow
		c.rowLabel(row, mid)
		fill, ink := colourTarget, colourInk
		if row.queengate {
			fill, ink = colourQueengate, "#FFFFFF"
		}
		end := x(row.rate)
		c.rect(plotLeft, mid-throughputBar/2, end-plotLeft, throughputBar, fill)
		if row.high > row.low {
			lo, hi := x(row.low), x(row.high)
			c.line(lo, mid, hi, mid, colourWhisker, 1.5)
			c.line(lo, mid-5, lo, mid+5, colourWhisker, 1.5)
			c.line(hi, mid-5, hi, mid+5, colourWhisker, 1.5)
		}
		// The value goes inside the bar when it fits left of the whisker,
		// and past the bar and whisker otherwise.
		value := formatRate(row.rate)
		if plotLeft+6+textWidth(value, 12)+6 <= x(row.low) {
			c.text(plotLeft+6, mid+4, value, `font-size="12" font-weight="bold" fill="`+ink+`"`)
		} else {
			c.text(max(end, x(row.high))+6, mid+4, value, `font-size="12"`)
		}
	}
	c.line(plotLeft, axisY, plotRight, axisY, colourInk, 1)
	c.text((plotLeft+plotRight)/2, axisY+32, "messages per second", `font-size="11" text-anchor="middle"`)
	return axisY + 36
}

// latencyPanel draws each target's p50, p90 and p99 as grouped bars on a
// log10 axis, since targets can differ by orders of magnitude. It returns
// the y below the panel.
func (c *canvas) latencyPanel(top float64, rows []chartRow) float64 {
	c.text(chartMargin, top+14, "Request latency (ms, log scale)", `font-size="14" font-weight="bold"`)
	for i, p := range percentiles {
		lx := float64(plotRight - 150 + 60*i)
		c.rect(lx, top+4, 12, 12, p.colour)
		c.text(lx+16, top+14, p.name, `font-size="12"`)
	}
	barsTop := top + 28
	axisY := barsTop + float64(len(rows))*latencyRow

	lowest, highest := math.Inf(1), 0.0
	for _, row := range rows {
		for _, v := range row.latency {
			if v > 0 {
				lowest = min(lowest, v)
				highest = max(highest, v)
			}
		}
	}
	ticks := decadeTicks(lowest, highest)
	logLo, logHi := math.Log10(ticks[0]), math.Log10(ticks[len(ticks)-1])
	x := func(v float64) float64 {
		if v <= ticks[0] {
			return plotLeft
		}
		return plotLeft + (math.Log10(v)-logLo)/(logHi-logLo)*(plotRight-plotLeft)
	}

	for i, row := range rows {
		c.rowBand(row, barsTop+float64(i)*latencyRow, latencyRow)
	}
	for _, t := range ticks {
		c.line(x(t), barsTop-4, x(t), axisY, colourGrid, 1)
		c.text(x(t), axisY+15, formatDecade(t), `font-size="11" text-anchor="middle" fill="`+colourMuted+`"`)
	}
	for i, row := range rows {
		groupTop := barsTop + float64(i)*latencyRow + 7
		c.rowLabel(row, groupTop+1.5*latencyBar+1)
		for j, p := range percentiles {
			y := groupTop + float64(j)*(latencyBar+1)
			end := x(row.latency[j])
			c.rect(plotLeft, y, end-plotLeft, latencyBar, p.colour)
			c.text(end+4, y+latencyBar-1.5, formatLatency(row.latency[j]), `font-size="9.5" fill="`+colourMuted+`"`)
		}
	}
	c.line(plotLeft, axisY, plotRight, axisY, colourInk, 1)
	c.text((plotLeft+plotRight)/2, axisY+32, "milliseconds (log scale)", `font-size="11" text-anchor="middle"`)
	return axisY + 36
}

// rowBand shades queengate's row so it can be followed across the panels.
func (c *canvas) rowBand(row chartRow, y, height float64) {
	if row.queengate {
		c.rect(chartMargin, y, chartWidth-2*chartMargin, height, colourBand)
	}
}

// rowLabel writes a target's name right-aligned before the plot, centred
// on mid.
func (c *canvas) rowLabel(row chartRow, mid float64) {
	attrs := `font-size="12" text-anchor="end"`
	if row.queengate {
		attrs += ` font-weight="bold" fill="` + colourQueengate + `"`
	}
	label := row.label
	if r := []rune(label); len(r) > labelRunes {
		label = string(r[:labelRunes-1]) + "…"
	}
	c.text(plotLeft-8, mid+4, label, attrs)
}

// rect draws a filled rectangle; a negative width draws nothing visible.
func (c *canvas) rect(x, y, width, height float64, fill string) {
	fmt.Fprintf(c, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n",
		num(x), num(y), num(max(width, 0)), num(height), fill)
}

// line draws a straight line.
func (c *canvas) line(x1, y1, x2, y2 float64, stroke string, width float64) {
	fmt.Fprintf(c, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"/>`+"\n",
		num(x1), num(y1), num(x2), num(y2), stroke, num(width))
}

// text draws s, escaped for XML, at (x, y). attrs are further attributes
// written as they are, so they must come from this file, never from data.
func (c *canvas) text(x, y float64, s, attrs string) {
	fmt.Fprintf(c, `<text x="%s" y="%s" %s>`, num(x), num(y), attrs)
	xml.EscapeText(c, []byte(s)) // cannot fail: a bytes.Buffer takes every write
	c.WriteString("</text>\n")
}

// niceTicks returns evenly spaced axis ticks from 0 to at least top, at
// most n intervals, with a step of 1, 2 or 5 × 10^k so that the labels are
// round. It returns 0 and 1 when top is not a positive finite number.
func niceTicks(top float64, n int) []float64 {
	if !(top > 0) || math.IsInf(top, 1) {
		return []float64{0, 1}
	}
	raw := top / float64(max(n, 1))
	exp := int(math.Floor(math.Log10(raw)))
	mult := 10.0
	for _, m := range []float64{1, 2, 5} {
		// The tolerance stops rounding error from skipping an exact fit.
		if m*math.Pow10(exp) >= raw*(1-1e-9) {
			mult = m
			break
		}
	}
	if mult == 10 {
		mult, exp = 1, exp+1
	}
	// Dividing by a power of ten, which is exact, rather than multiplying
	// by its inverse, which is not, makes 3 × 0.1 come out as 0.3.
	tick := func(i int) float64 {
		if exp < 0 {
			return float64(i) * mult / math.Pow10(-exp)
		}
		return float64(i) * mult * math.Pow10(exp)
	}
	ticks := []float64{0}
	for i := 1; ticks[len(ticks)-1] < top*(1-1e-9); i++ {
		ticks = append(ticks, tick(i))
	}
	return ticks
}

// decadeTicks returns the powers of ten that enclose lowest to highest
// (positive values), at least one decade and no lower than 0.001 ms, below
// which latencies are noise. Without positive values it returns 0.1 and 1.
func decadeTicks(lowest, highest float64) []float64 {
	lo, hi := -1, 0
	if highest > 0 && !math.IsInf(highest, 1) && lowest <= highest {
		lo = max(int(math.Floor(math.Log10(lowest))), -3)
		hi = max(int(math.Ceil(math.Log10(highest))), lo+1)
	}
	var ticks []float64
	for k := lo; k <= hi; k++ {
		if k < 0 {
			ticks = append(ticks, 1/math.Pow10(-k))
		} else {
			ticks = append(ticks, math.Pow10(k))
		}
	}
	return ticks
}

// formatTick formats a throughput tick compactly: 500, 20k, 1.5M.
func formatTick(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// formatDecade formats a tick of the latency axis: 0.01, 1, 10,000.
func formatDecade(ms float64) string {
	if ms >= 1000 {
		return FormatCount(int64(ms))
	}
	return strconv.FormatFloat(ms, 'f', -1, 64)
}

// formatLatency formats milliseconds for a latency bar: two decimals like
// the tables, fewer for large values and one more below 0.01 ms, down to
// the axis' floor of 0.001 ms.
func formatLatency(ms float64) string {
	switch {
	case ms >= 100:
		return FormatCount(int64(math.Round(ms)))
	case ms >= 10:
		return strconv.FormatFloat(ms, 'f', 1, 64)
	case ms >= 0.01:
		return strconv.FormatFloat(ms, 'f', 2, 64)
	case ms >= 0.001:
		return strconv.FormatFloat(ms, 'f', 3, 64)
	case ms > 0:
		return "<0.001"
	}
	return "0"
}

// textWidth estimates the width of s in a sans-serif font of size px,
// enough to decide whether a label fits inside a bar.
func textWidth(s string, size float64) float64 {
	return float64(len([]rune(s))) * size * 0.6
}

// finite returns v, or 0 when v is negative, NaN or infinite, so that no
// coordinate derived from it can be NaN or Inf.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0
	}
	return v
}

// num formats a coordinate with one decimal, as 0 if it is not finite:
// one bad value must not make the whole image invalid.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
