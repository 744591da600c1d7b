package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/queengate/queengate/internal/bench"
)

// resultHeader names the columns of resultCells. The terminal table and the
// Markdown share it so the two never disagree.
var resultHeader = []string{
	"target", "scenario", "msg/s", "p50 ms", "p90 ms", "p99 ms", "max ms",
	"queued", "duplicate", "failed", "violations",
	"CPU s/M msgs", "PostgreSQL CPU s/M", "autovac s/M", "peak RSS MiB", "probe skipped", "narrowed", "unrolled", "cache B/hash",
	"frame", "stored B/msg", "hydrations", "fills", "gap ms",
}

// resultTextColumns is how many leading columns of resultHeader hold text;
// the others hold numbers and are right-aligned.
const resultTextColumns = 2

// ratioTitle heads the ratio table; the ratio is per round, so the figures
// say how the rounds varied, not a ratio of medians.
const ratioTitle = "throughput ratios (msg/s, per round)"

// ratioHeader names the columns of the ratio table.
var ratioHeader = []string{"ratio", "min", "median", "max"}

// WriteTable writes r as aligned plain-text tables for a terminal: the
// workload line, one row per target, any exactness violations, then the
// throughput ratios of a --compare run.
func WriteTable(w io.Writer, r *bench.Report) error {
	var b bytes.Buffer
	b.WriteString(summaryLine(r) + "\n\n")
	writeAligned(&b, resultHeader, resultRows(r), resultTextColumns)
	for _, line := range violationLines(r) {
		b.WriteString("\n" + line + "\n")
	}
	for _, line := range replicationCPULines(r) {
		b.WriteString("\n" + line + "\n")
	}
	if line := servingCPULine(r); line != "" {
		b.WriteString("\n" + line + "\n")
	}
	if len(r.Ratios) > 0 {
		b.WriteString("\n" + ratioTitle + "\n")
		writeAligned(&b, ratioHeader, ratioRows(r.Ratios), 1)
	}
	if header, rows := partitionRounds(r); len(rows) > 0 {
		b.WriteString("\n" + PartitionRoundsTitle + "\n")
		writeAligned(&b, header, rows, 0)
	}
	for _, line := range checkLines(r) {
		b.WriteString("\n" + line)
	}
	if len(r.Checks) > 0 {
		b.WriteString("\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteMarkdown writes r as GitHub Markdown, ready to paste into an issue
// or a README: what was run where, then the same tables as WriteTable.
func WriteMarkdown(w io.Writer, r *bench.Report) error {
	var b bytes.Buffer
	if r.Machine != "" {
		fmt.Fprintf(&b, "Measured on %s", r.Machine)
	} else {
		b.WriteString("Measured")
	}
	if r.Command != "" {
		// A fence longer than any run of backticks in the command keeps
		// the code block closed where it should be.
		fence := "```"
		for strings.Contains(r.Command, fence) {
			fence += "`"
		}
		fmt.Fprintf(&b, " with:\n\n%s\n%s\n%s\n\n", fence, r.Command, fence)
	} else {
		b.WriteString(".\n\n")
	}
	fmt.Fprintf(&b, "Workload: %s. %s\n\n", describeWorkload(r.Workload), figuresNote(r))
	writeMarkdownTable(&b, resultHeader, resultRows(r), resultTextColumns)
	for _, line := range violationLines(r) {
		fmt.Fprintf(&b, "\n**%s**\n", line)
	}
	for _, line := range replicationCPULines(r) {
		fmt.Fprintf(&b, "\n%s\n", line)
	}
	if line := servingCPULine(r); line != "" {
		fmt.Fprintf(&b, "\n%s\n", line)
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintf(&b, "\n**%s**\n\n", ratioTitle)
		writeMarkdownTable(&b, ratioHeader, ratioRows(r.Ratios), 1)
	}
	if header, rows := partitionRounds(r); len(rows) > 0 {
		fmt.Fprintf(&b, "\n**%s**\n\n", PartitionRoundsTitle)
		writeMarkdownTable(&b, header, rows, 0)
	}
	if lines := checkLines(r); len(lines) > 0 {
		b.WriteString("\n")
		for _, line := range lines {
			b.WriteString("- " + line + "\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteJSON writes the whole of r as indented JSON, for scripts and for
// comparing runs later.
func WriteJSON(w io.Writer, r *bench.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Commands hold shell operators such as && that should stay readable.
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// reportRows returns the results to show: one per target (the medians over
// the rounds), or every round when the run computed no medians.
func reportRows(r *bench.Report) []bench.Result {
	if len(r.Medians) > 0 {
		return r.Medians
	}
	return r.Results
}

// resultRows formats reportRows as cells under resultHeader.
func resultRows(r *bench.Report) [][]string {
	var rows [][]string
	for _, res := range reportRows(r) {
		rows = append(rows, []string{
			res.Target,
			res.Scenario,
			formatRate(res.Throughput),
			formatMs(res.P50),
			formatMs(res.P90),
			formatMs(res.P99),
			formatMs(res.Max),
			FormatCount(res.Queued),
			FormatCount(res.Duplicate),
			FormatCount(res.Failed),
			FormatCount(res.Violations),
			strconv.FormatFloat(res.CPUSecondsPerMillion, 'f', 2, 64),
			formatOptionalSeconds(res.PostgresCPUPerMillion),
			formatOptionalSeconds(res.AutovacuumCPUPerMillion),
			strconv.FormatFloat(float64(res.PeakRSSBytes)/(1<<20), 'f', 1, 64),
			formatShare(res.ProbeSkippedShare),
			formatShare(res.ProbeNarrowedShare),
			formatShare(res.UnrolledShare),
			formatOptional(res.CacheBytesPerHash),
			formatOptional(res.MeanFrame),
			formatOptional(res.StoredBytesPerMessage),
			formatOptionalCount(res.Hydrations),
			formatOptionalCount(res.Fills),
			formatMs(res.MaxGap),
		})
	}
	return rows
}

// manyPartitions is the workload size, in partitions, from which reports
// add a table per round of what many partitions cost the gateway.
const manyPartitions = 10_000

// PartitionRoundsTitle heads that table.
const PartitionRoundsTitle = "many partitions, per round"

// partitionRounds is a row per round of queengate's run with many
// partitions: its throughput against the first peer's and the ratio, what
// the partitions cost the gateway (CPU, cache, memory, hydrations,
// evictions, partitions kept out by the admission gate) and both sides'
// p99. No rows for fewer partitions.
func partitionRounds(r *bench.Report) (header []string, rows [][]string) {
	w := r.Workload
	if w.Partitions*max(w.Queues, 1) < manyPartitions {
		return nil, nil
	}
	peer := ""
	for _, q := range r.Ratios {
		if _, fleet := bench.FleetSize(q.Target); !fleet {
			peer = q.Target
			break
		}
	}
	peerResult := map[int]bench.Result{}
	for _, res := range r.Results {
		if peer != "" && res.Target == peer {
			peerResult[res.Round] = res
		}
	}
	header = []string{"round", "queengate msg/s"}
	if peer != "" {
		header = append(header, peer+" msg/s", "ratio")
	}
	header = append(header, "CPU s/M", "PostgreSQL CPU s/M", "cache B/hash", "cache B/entry", "gateway peak RSS MiB",
		"partitions touched", "hydrations", "births", "evictions", "suppressed", "queengate p99 ms")
	if peer != "" {
		header = append(header, peer+" p99 ms")
	}
	for _, q := range r.Results {
		if q.Target != "queengate" {
			continue
		}
		row := []string{strconv.Itoa(q.Round), formatRate(q.Throughput)}
		p, ok := peerResult[q.Round]
		if peer != "" {
			row = append(row, "n/a", "n/a")
			if ok && p.Throughput > 0 {
				row[2], row[3] = formatRate(p.Throughput), strconv.FormatFloat(q.Throughput/p.Throughput, 'f', 2, 64)
			}
		}
		row = append(row,
			strconv.FormatFloat(q.CPUSecondsPerMillion, 'f', 2, 64),
			formatOptionalSeconds(q.PostgresCPUPerMillion),
			formatOptional(q.CacheBytesPerHash),
			formatOptional(q.CacheBytesPerEntry),
			FormatMiB(q.GatewayPeakRSSBytes),
			FormatCount(q.PartitionsTouched),
			formatOptionalCount(q.Hydrations),
			formatOptionalCount(q.Births),
			formatOptionalCount(q.Evictions),
			formatOptionalCount(q.Suppressed),
			formatMs(q.P99))
		if peer != "" {
			row = append(row, "n/a")
			if ok {
				row[len(row)-1] = formatMs(p.P99)
			}
		}
		rows = append(rows, row)
	}
	return header, rows
}

// checkLines says each budget check of the run, met or missed.
func checkLines(r *bench.Report) []string {
	var lines []string
	for _, c := range r.Checks {
		verdict := "met"
		if !c.Met {
			verdict = "MISSED"
		}
		lines = append(lines, fmt.Sprintf("check, %s round %d: %s: %s: %s", c.Target, c.Round, c.Name, c.Figures, verdict))
	}
	return lines
}

// FormatMiB formats bytes as MiB with one decimal, "n/a" for unknown (0).
func FormatMiB(v int64) string {
	if v <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(v)/(1<<20), 'f', 1, 64)
}

// formatOptionalCount prints a count, n/a when unknown (negative).
func formatOptionalCount(v int64) string {
	if v < 0 {
		return "n/a"
	}
	return FormatCount(v)
}

// formatOptionalSeconds prints CPU seconds, n/a when unknown (negative).
func formatOptionalSeconds(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// ratioRows formats ratios as cells under ratioHeader.
func ratioRows(ratios []bench.Ratio) [][]string {
	var rows [][]string
	for _, q := range ratios {
		label := q.Label
		if label == "" {
			label = "queengate ÷ " + q.Target
		}
		rows = append(rows, []string{
			label,
			strconv.FormatFloat(q.Min, 'f', 2, 64),
			strconv.FormatFloat(q.Median, 'f', 2, 64),
			strconv.FormatFloat(q.Max, 'f', 2, 64),
		})
	}
	return rows
}

// violationLines returns one line per target that broke exactness. It sums
// over every round, since a median could hide a single bad round, and
// falls back to the medians only when the rounds are absent.
func violationLines(r *bench.Report) []string {
	results := r.Results
	if len(results) == 0 {
		results = r.Medians
	}
	var targets []string
	sums := make(map[string]int64)
	for _, res := range results {
		if res.Violations <= 0 {
			continue
		}
		if _, seen := sums[res.Target]; !seen {
			targets = append(targets, res.Target)
		}
		sums[res.Target] += res.Violations
	}
	lines := make([]string, 0, len(targets))
	for _, t := range targets {
		lines = append(lines, fmt.Sprintf("EXACTNESS VIOLATIONS: target %s: %d", t, sums[t]))
	}
	return lines
}

// replicationCPULines say, with --replication, what each target's run
// cost the PostgreSQL primary and its standby in CPU: neither is in the
// table's CPU column, the target's own.
func replicationCPULines(r *bench.Report) []string {
	if r.Workload.Replication == "" {
		return nil
	}
	var lines []string
	for _, res := range reportRows(r) {
		lines = append(lines, fmt.Sprintf("PostgreSQL CPU s/M msgs, %s: primary %.2f, standby %.2f", res.Target,
			res.PrimaryCPUPerMillion, res.StandbyCPUPerMillion))
	}
	return lines
}

// servingCPULine says what every process serving a message cost per
// million messages: queengate's own (gateways and NATS) with the
// PostgreSQL it writes to, against each peer's server (a peer's
// PostgreSQL figure is autovacuum lagging into its run, and is left
// out). Empty unless queenbench ran PostgreSQL.
func servingCPULine(r *bench.Report) string {
	var parts []string
	for _, res := range reportRows(r) {
		if bench.BaseName(res.Target) == "queengate" && res.PostgresCPUPerMillion >= 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f + PostgreSQL %.2f = %.2f", res.Target, res.CPUSecondsPerMillion,
				res.PostgresCPUPerMillion, res.CPUSecondsPerMillion+res.PostgresCPUPerMillion))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	for _, res := range reportRows(r) {
		if bench.BaseName(res.Target) != "queengate" {
			parts = append(parts, fmt.Sprintf("%s %.2f", res.Target, res.CPUSecondsPerMillion))
		}
	}
	return "CPU s/M msgs of every process serving: " + strings.Join(parts, "; ")
}

// replicationLabel names w's --replication mode with the
// synchronous_commit its primary runs with.
func replicationLabel(w bench.Workload) string {
	return fmt.Sprintf("replication %s (synchronous_commit %s)", w.Replication, w.SynchronousCommit())
}

// roundCount returns the number of rounds behind each median: the most
// results any one target has in r.Results (0 when there are none).
func roundCount(r *bench.Report) int {
	type key struct{ target, scenario string }
	counts := make(map[key]int)
	n := 0
	for _, res := range r.Results {
		k := key{res.Target, res.Scenario}
		counts[k]++
		n = max(n, counts[k])
	}
	return n
}

// figuresNote says what the figures are, so a reader does not take a
// median for a single measurement or the other way round.
func figuresNote(r *bench.Report) string {
	switch n := roundCount(r); {
	case len(r.Medians) == 0:
		return "Figures are per round."
	case n == 1:
		return "Figures are from the single round of the run."
	case n > 1:
		return fmt.Sprintf("Figures are medians over the %d rounds of the run.", n)
	}
	return "Figures are medians over the rounds of the run."
}

// summaryLine is the first line of the terminal table: where and what.
func summaryLine(r *bench.Report) string {
	if r.Machine == "" {
		return describeWorkload(r.Workload)
	}
	return r.Machine + " — " + describeWorkload(r.Workload)
}

// describeWorkload names the scenario and the workload's shape in one line.
func describeWorkload(w bench.Workload) string {
	return "scenario " + w.Scenario + ": " + workloadDetails(w)
}

// workloadDetails describes the workload's shape without the scenario name,
// for places that show the scenario on its own.
func workloadDetails(w bench.Workload) string {
	perRequest := strconv.Itoa(w.PerRequest)
	if w.MinPerRequest > 0 && w.MinPerRequest < w.PerRequest {
		perRequest = fmt.Sprintf("%d–%d", w.MinPerRequest, w.PerRequest)
	}
	parts := []string{
		fmt.Sprintf("%d producers", w.Producers),
		perRequest + " msgs/request",
		fmt.Sprintf("%d partitions × %d queues", w.Partitions, w.Queues),
		fmt.Sprintf("%d B payload", w.PayloadBytes),
	}
	switch {
	case w.RetryShare <= 0:
		parts = append(parts, "no retries")
	case w.CrossShare > 0:
		parts = append(parts, fmt.Sprintf("%s retries (%s cross-producer)",
			formatPercent(w.RetryShare), formatPercent(w.CrossShare)))
	default:
		parts = append(parts, formatPercent(w.RetryShare)+" retries")
	}
	if w.WindowSeconds > 0 {
		parts = append(parts, fmt.Sprintf("%d s window", w.WindowSeconds))
	} else {
		parts = append(parts, "no window")
	}
	if w.Replication != "" {
		parts = append(parts, replicationLabel(w))
	}
	return strings.Join(parts, ", ")
}

// writeAligned writes a header and rows as columns padded with spaces.
// Numbers are right-aligned so magnitudes line up; the first textColumns
// columns are padded to a common width first, which keeps them
// left-aligned under tabwriter.AlignRight.
func writeAligned(b *bytes.Buffer, header []string, rows [][]string, textColumns int) {
	all := append([][]string{header}, rows...)
	widths := make([]int, textColumns)
	for _, cells := range all {
		for col := range widths {
			widths[col] = max(widths[col], utf8.RuneCountInString(cells[col]))
		}
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, cells := range all {
		for col, c := range cells {
			if col < textColumns {
				c += strings.Repeat(" ", widths[col]-utf8.RuneCountInString(c))
			}
			// AlignRight needs every cell, the last too, ended by a tab.
			fmt.Fprint(tw, c+"\t")
		}
		fmt.Fprint(tw, "\n")
	}
	tw.Flush() // cannot fail: the buffer takes every write
}

// writeMarkdownTable writes a header and rows as a GitHub Markdown table,
// right-aligning the columns after the first textColumns.
func writeMarkdownTable(b *bytes.Buffer, header []string, rows [][]string, textColumns int) {
	writeMarkdownRow(b, header)
	align := make([]string, len(header))
	for i := range align {
		align[i] = "---"
		if i >= textColumns {
			align[i] = "--:"
		}
	}
	b.WriteString("|" + strings.Join(align, "|") + "|\n")
	for _, cells := range rows {
		writeMarkdownRow(b, cells)
	}
}

// writeMarkdownRow writes one table row. A | or a line break in a cell
// (say, in a target name) would otherwise break the table.
func writeMarkdownRow(b *bytes.Buffer, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		c = strings.ReplaceAll(c, "|", `\|`)
		c = strings.ReplaceAll(c, "\n", " ")
		b.WriteString(" " + c + " |")
	}
	b.WriteString("\n")
}

// formatMs formats d as milliseconds with two decimals, the unit of every
// latency in the reports.
func formatMs(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

// formatRate formats a rate per second as a whole number with thousands
// separators.
func formatRate(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return FormatCount(int64(math.Round(v)))
}

// FormatCount formats n with a comma every three digits, which makes the
// orders of magnitude of a table readable at a glance.
func FormatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}

// formatShare formats a share (0 to 1) as a percentage with one decimal, or
// "n/a" for the negative values that mean unknown.
func formatShare(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
}

// formatOptional formats v with one decimal, or "n/a" for the negative
// values that mean unknown.
func formatOptional(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// formatPercent formats a share of a workload (0 to 1) as a short
// percentage such as "10%" or "12.5%".
func formatPercent(v float64) string {
	return fmt.Sprintf("%.4g%%", v*100)
}
