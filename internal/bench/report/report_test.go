package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/queengate/queengate/internal/bench"
)

// testWorkload is the workload of every test report.
var testWorkload = bench.Workload{
	Scenario:      "steady",
	Producers:     8,
	PerRequest:    100,
	Total:         1_000_000,
	Queues:        4,
	Partitions:    16,
	PayloadBytes:  256,
	RetryShare:    0.1,
	CrossShare:    0.5,
	WindowSeconds: 60,
	FlushSize:     500,
	Linger:        2 * time.Millisecond,
	Gateways:      1,
	Seed:          42,
}

// testResult makes up one round of a target: the latencies follow from
// p50, and only queengate knows its probe and cache figures.
func testResult(target string, round int, rate float64, p50 time.Duration) bench.Result {
	res := bench.Result{
		Target:                  target,
		Scenario:                "steady",
		Round:                   round,
		Messages:                1_000_000,
		Requests:                10_000,
		Elapsed:                 time.Duration(1e6 / rate * float64(time.Second)),
		Throughput:              rate,
		P50:                     p50,
		P90:                     2 * p50,
		P99:                     4 * p50,
		Max:                     10 * p50,
		Queued:                  900_000,
		Duplicate:               100_000,
		DistinctIDs:             900_000,
		CPUSecondsPerMillion:    1.25,
		AutovacuumCPUPerMillion: 0.5,
		PostgresCPUPerMillion:   -1,
		PeakRSSBytes:            64 << 20,
		ProbeSkippedShare:       -1,
		ProbeNarrowedShare:      -1,
		UnrolledShare:           -1,
		CacheBytesPerHash:       -1,
		MeanFrame:               -1,
		StoredBytesPerMessage:   -1,
		Hydrations:              -1,
		Births:                  -1,
		Fills:                   -1,
		MaxGap:                  20 * p50,
	}
	if target == "queengate" {
		res.ProbeSkippedShare = 0.875
		res.ProbeNarrowedShare = 0.12
		res.UnrolledShare = 0.003
		res.CacheBytesPerHash = 41.5
		res.MeanFrame = 812.5
		res.StoredBytesPerMessage = 163.9
		res.PostgresCPUPerMillion = 2.75
		res.Hydrations = 100
		res.Fills = 3
	}
	return res
}

// testTarget is a made-up target: its median throughput and p50.
type testTarget struct {
	name string
	rate float64
	p50  time.Duration
}

// testTargets are the targets of a typical --compare run.
var testTargets = []testTarget{
	{"queengate", 250_000, 2 * time.Millisecond},
	{"naive", 12_000, 40 * time.Millisecond},
	{"jetstream", 90_000, 5 * time.Millisecond},
	{"ceiling", 1_200_000, 300 * time.Microsecond},
}

// newTestReport builds a report of the targets over rounds rounds, whose
// throughput is 90%, 100% and 110% of the target's rate in turn, so the
// medians are the targets' rates. Ratios are made up.
func newTestReport(targets []testTarget, rounds int) *bench.Report {
	r := &bench.Report{
		Machine:  "2 cores, 23 GiB, linux/amd64",
		Command:  "queenbench --compare naive,jetstream,ceiling --rounds 3 --scenario steady",
		Workload: testWorkload,
	}
	factors := []float64{1.0, 0.9, 1.1}
	for _, t := range targets {
		for round := range rounds {
			r.Results = append(r.Results, testResult(t.name, round+1, t.rate*factors[round%3], t.p50))
		}
		r.Medians = append(r.Medians, testResult(t.name, 0, t.rate, t.p50))
	}
	for _, t := range targets[1:] {
		r.Ratios = append(r.Ratios, bench.Ratio{Target: t.name, Min: 0.5, Median: 2.0 / 3, Max: 20.8})
	}
	return r
}

func TestReportFormatMs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.00"},
		{time.Nanosecond, "0.00"},
		{5 * time.Microsecond, "0.01"},
		{1500 * time.Microsecond, "1.50"},
		{123456789 * time.Nanosecond, "123.46"},
		{90 * time.Second, "90000.00"},
	} {
		if got := formatMs(tc.d); got != tc.want {
			t.Errorf("formatMs(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestReportFormatNumbers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		got, want string
	}{
		{FormatCount(0), "0"},
		{FormatCount(999), "999"},
		{FormatCount(1000), "1,000"},
		{FormatCount(1234567), "1,234,567"},
		{FormatCount(-1234), "-1,234"},
		{formatRate(249_999.6), "250,000"},
		{formatRate(math.NaN()), "n/a"},
		{formatShare(0.875), "87.5%"},
		{formatShare(0), "0.0%"},
		{formatShare(-1), "n/a"},
		{formatOptional(41.54), "41.5"},
		{formatOptional(-1), "n/a"},
		{formatPercent(0.1), "10%"},
		{formatPercent(0.125), "12.5%"},
		{formatLatency(36_000.4), "36,000"},
		{formatLatency(12.34), "12.3"},
		{formatLatency(1.2), "1.20"},
		{formatLatency(0.3), "0.30"},
		{formatLatency(0.0023), "0.002"},
		{formatLatency(0.00001), "<0.001"},
		{formatLatency(0), "0"},
		{formatTick(1.5e6), "1.5M"},
		{formatTick(500e3), "500k"},
		{formatTick(0.2), "0.2"},
		{formatDecade(0.001), "0.001"},
		{formatDecade(1), "1"},
		{formatDecade(100_000), "100,000"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestReportTable(t *testing.T) {
	t.Parallel()

	wantSummary := "2 cores, 23 GiB, linux/amd64 — scenario steady: 8 producers, " +
		"100 msgs/request, 16 partitions × 4 queues, 256 B payload, " +
		"10% retries (50% cross-producer), 60 s window"
	wantRows := [][]string{
		{"target", "scenario", "msg/s", "p50", "ms", "p90", "ms", "p99", "ms", "max", "ms",
			"queued", "duplicate", "failed", "violations", "CPU", "s/M", "msgs",
			"PostgreSQL", "CPU", "s/M", "autovac", "s/M", "peak", "RSS", "MiB", "probe", "skipped", "narrowed", "unrolled", "cache", "B/hash",
			"frame", "stored", "B/msg", "hydrations", "fills", "gap", "ms"},
		{"queengate", "steady", "250,000", "2.00", "4.00", "8.00", "20.00",
			"900,000", "100,000", "0", "0", "1.25", "2.75", "0.50", "64.0", "87.5%", "12.0%", "0.3%", "41.5", "812.5", "163.9", "100", "3", "40.00"},
		{"naive", "steady", "12,000", "40.00", "80.00", "160.00", "400.00",
			"900,000", "100,000", "0", "0", "1.25", "n/a", "0.50", "64.0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "800.00"},
		{"jetstream", "steady", "90,000", "5.00", "10.00", "20.00", "50.00",
			"900,000", "100,000", "0", "0", "1.25", "n/a", "0.50", "64.0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "100.00"},
		{"ceiling", "steady", "1,200,000", "0.30", "0.60", "1.20", "3.00",
			"900,000", "100,000", "0", "0", "1.25", "n/a", "0.50", "64.0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "6.00"},
	}
	wantRatios := [][]string{
		{"ratio", "min", "median", "max"},
		{"queengate", "÷", "naive", "0.50", "0.67", "20.80"},
		{"queengate", "÷", "jetstream", "0.50", "0.67", "20.80"},
		{"queengate", "÷", "ceiling", "0.50", "0.67", "20.80"},
	}

	t.Run("Medians", func(t *testing.T) {
		t.Parallel()
		lines := tableLines(t, newTestReport(testTargets, 3))
		if lines[0] != wantSummary {
			t.Errorf("first line = %q, want %q", lines[0], wantSummary)
		}
		main := lines[2 : 2+len(wantRows)]
		checkFields(t, main, wantRows)
		// Right-aligned columns give every line of a table the same width.
		for _, line := range main {
			if utf8.RuneCountInString(line) != utf8.RuneCountInString(main[0]) {
				t.Errorf("line %q is not as wide as the header %q", line, main[0])
			}
		}
		i := slices.Index(lines, ratioTitle)
		if i < 0 {
			t.Fatalf("no line %q in\n%s", ratioTitle, strings.Join(lines, "\n"))
		}
		checkFields(t, lines[i+1:], wantRatios)
		wantServing := "CPU s/M msgs of every process serving: queengate 1.25 + PostgreSQL 2.75 = 4.00; " +
			"naive 1.25; jetstream 1.25; ceiling 1.25"
		if !slices.Contains(lines, wantServing) {
			t.Errorf("no line %q in\n%s", wantServing, strings.Join(lines, "\n"))
		}
	})

	t.Run("PerRound", func(t *testing.T) {
		t.Parallel()
		r := newTestReport(testTargets[:2], 3)
		r.Medians, r.Ratios = nil, nil
		lines := tableLines(t, r)
		checkFields(t, lines[2:], [][]string{
			wantRows[0],
			{"queengate", "steady", "250,000", "2.00", "4.00", "8.00", "20.00",
				"900,000", "100,000", "0", "0", "1.25", "2.75", "0.50", "64.0", "87.5%", "12.0%", "0.3%", "41.5", "812.5", "163.9", "100", "3", "40.00"},
			{"queengate", "steady", "225,000", "2.00", "4.00", "8.00", "20.00",
				"900,000", "100,000", "0", "0", "1.25", "2.75", "0.50", "64.0", "87.5%", "12.0%", "0.3%", "41.5", "812.5", "163.9", "100", "3", "40.00"},
			{"queengate", "steady", "275,000", "2.00", "4.00", "8.00", "20.00",
				"900,000", "100,000", "0", "0", "1.25", "2.75", "0.50", "64.0", "87.5%", "12.0%", "0.3%", "41.5", "812.5", "163.9", "100", "3", "40.00"},
			{"naive", "steady", "12,000", "40.00", "80.00", "160.00", "400.00",
				"900,000", "100,000", "0", "0", "1.25", "n/a", "0.50", "64.0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "800.00"},
			{"naive", "steady", "10,800", "40.00", "80.00", "160.00", "400.00",
				"900,000", "100,000", "0", "0", "1.25", "n/a", "0.50", "64.0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "800.00"},
			{"naive", "steady", "13,200", "40.00", "80.00", "160.00", "400.00",
				"900,000", "100,000", "0", "0", "1.25", "n/a", "0.50", "64.0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "800.00"},
		})
		if slices.Contains(lines, ratioTitle) {
			t.Errorf("ratio table without ratios")
		}
	})
}

// tableLines renders r with WriteTable and splits it into lines.
func tableLines(t *testing.T, r *bench.Report) []string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// checkFields checks that lines start with lines whose space-separated
// fields are want.
func checkFields(t *testing.T, lines []string, want [][]string) {
	t.Helper()
	if len(lines) < len(want) {
		t.Fatalf("got %d lines, want at least %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !slices.Equal(got, w) {
			t.Errorf("line %d:\n got %q\nwant %q", i, got, w)
		}
	}
}

func TestReportViolations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// violations sets Violations of the results (Results[i]: n).
		violations map[int]int64
		want       []string
	}{
		{name: "None"},
		{
			// naive's rounds are Results[3:6]: two bad rounds add up.
			name:       "OneTarget",
			violations: map[int]int64{3: 2, 5: 3},
			want:       []string{"EXACTNESS VIOLATIONS: target naive: 5"},
		},
		{
			name:       "TwoTargets",
			violations: map[int]int64{0: 1, 8: 7},
			want: []string{
				"EXACTNESS VIOLATIONS: target queengate: 1",
				"EXACTNESS VIOLATIONS: target jetstream: 7",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newTestReport(testTargets, 3)
			for i, n := range tc.violations {
				r.Results[i].Violations = n
			}
			for _, format := range []struct {
				name  string
				write func(io.Writer, *bench.Report) error
				line  string // how a violation line is set
			}{
				{"Table", WriteTable, "%s"},
				{"Markdown", WriteMarkdown, "**%s**"},
			} {
				var b bytes.Buffer
				if err := format.write(&b, r); err != nil {
					t.Fatal(err)
				}
				out := b.String()
				if got := strings.Count(out, "EXACTNESS VIOLATIONS"); got != len(tc.want) {
					t.Errorf("%s: %d violation lines, want %d:\n%s", format.name, got, len(tc.want), out)
				}
				for _, w := range tc.want {
					if !strings.Contains(out, "\n"+fmt.Sprintf(format.line, w)+"\n") {
						t.Errorf("%s: no line %q in\n%s", format.name, w, out)
					}
				}
			}
		})
	}
}

// markdownCell matches one cell of a Markdown table row: | then text with
// no unescaped |.
var markdownCell = regexp.MustCompile(`\|(?:[^|\\]|\\.)*`)

// markdownAlign matches a table's delimiter row.
var markdownAlign = regexp.MustCompile(`^\|(?: *:?-+:? *\|)+$`)

func TestReportMarkdown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		report     func() *bench.Report
		wantTables int
		wantText   []string
	}{
		{
			name:       "Compare",
			report:     func() *bench.Report { return newTestReport(testTargets, 3) },
			wantTables: 2,
			wantText: []string{
				"Measured on 2 cores, 23 GiB, linux/amd64 with:\n\n```\n" +
					"queenbench --compare naive,jetstream,ceiling --rounds 3 --scenario steady\n```\n",
				"Workload: scenario steady: 8 producers,",
				"Figures are medians over the 3 rounds of the run.",
				"| queengate | steady | 250,000 | 2.00 | 4.00 | 8.00 | 20.00 | 900,000 | 100,000 | 0 | 0 | 1.25 | 2.75 | 0.50 | 64.0 | 87.5% | 12.0% | 0.3% | 41.5 | 812.5 | 163.9 | 100 | 3 | 40.00 |",
				"**" + ratioTitle + "**",
				"| queengate ÷ naive | 0.50 | 0.67 | 20.80 |",
			},
		},
		{
			name: "AwkwardText",
			report: func() *bench.Report {
				r := newTestReport([]testTarget{{"queengate", 10, time.Millisecond}, {"a|b", 5, time.Second}}, 1)
				r.Command = "queenbench --label '```' | tee out"
				return r
			},
			wantTables: 2,
			wantText: []string{
				"\n````\nqueenbench --label '```' | tee out\n````\n",
				"Figures are from the single round of the run.",
				`| a\|b | steady |`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := WriteMarkdown(&b, tc.report()); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, w := range tc.wantText {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in\n%s", w, out)
				}
			}
			tables := markdownTables(out)
			if len(tables) != tc.wantTables {
				t.Fatalf("%d tables, want %d:\n%s", len(tables), tc.wantTables, out)
			}
			for _, table := range tables {
				if len(table) < 3 || !markdownAlign.MatchString(table[1]) {
					t.Errorf("table without a header, delimiter row and rows:\n%s", strings.Join(table, "\n"))
					continue
				}
				cells := len(markdownCell.FindAllString(table[0], -1))
				for _, row := range table {
					if n := len(markdownCell.FindAllString(row, -1)); n != cells {
						t.Errorf("row %q has %d cells, header %d", row, n-1, cells-1)
					}
				}
			}
		})
	}
}

// markdownTables returns the runs of consecutive lines that start with |.
func markdownTables(s string) [][]string {
	var tables [][]string
	var table []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "|") {
			table = append(table, line)
			continue
		}
		if table != nil {
			tables = append(tables, table)
			table = nil
		}
	}
	return tables
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	want := newTestReport(testTargets, 3)
	want.Results[4].Violations = 3
	var b bytes.Buffer
	if err := WriteJSON(&b, want); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\n  \"machine\": ") {
		t.Errorf("not indented:\n%s", b.String())
	}
	var got bench.Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, *want)
	}
}

func TestChartSVG(t *testing.T) {
	t.Parallel()
	six := []testTarget{
		{"slowpoke", 3, 9 * time.Second},
		{"naive", 120, 400 * time.Millisecond},
		{"jetstream", 9_000, 5 * time.Millisecond},
		{"queengate", 250_000, 2 * time.Millisecond},
		{"ceiling", 1_200_000, 300 * time.Microsecond},
		{"nothing", 12_000_000, 2 * time.Microsecond},
	}
	for _, tc := range []struct {
		name   string
		report func() *bench.Report
	}{
		{"Compare", func() *bench.Report { return newTestReport(testTargets, 3) }},
		{"OneTarget", func() *bench.Report { return newTestReport(testTargets[:1], 3) }},
		{"SixTargetsManyDecades", func() *bench.Report { return newTestReport(six, 5) }},
		{"ZeroValuesOneRound", func() *bench.Report {
			return newTestReport([]testTarget{{"queengate", 0, 0}, {"naive", 0, 0}}, 1)
		}},
		{"PerRound", func() *bench.Report {
			r := newTestReport(testTargets, 2)
			r.Medians = nil
			return r
		}},
		{"NotANumber", func() *bench.Report {
			r := newTestReport(testTargets[:2], 1)
			r.Medians[1].Throughput = math.NaN()
			r.Results[1].Throughput = math.Inf(1)
			return r
		}},
		{"XMLText", func() *bench.Report {
			r := newTestReport([]testTarget{{"queengate", 10, time.Millisecond}, {`<b>&"x"`, 5, time.Second}}, 2)
			r.Machine = "a <machine> & more"
			return r
		}},
		{"Empty", func() *bench.Report { return &bench.Report{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.report()
			var b bytes.Buffer
			if err := WriteChartSVG(&b, r); err != nil {
				t.Fatal(err)
			}
			svg := b.String()
			for _, bad := range []string{"NaN", "Inf"} {
				if strings.Contains(svg, bad) {
					t.Errorf("%s in the SVG:\n%s", bad, svg)
				}
			}
			texts, err := svgTexts(svg)
			if err != nil {
				t.Fatalf("not well-formed XML: %v\n%s", err, svg)
			}
			for _, res := range r.Results {
				if !slices.ContainsFunc(texts, func(s string) bool { return strings.HasPrefix(s, res.Target) }) {
					t.Errorf("no text for target %q in %q", res.Target, texts)
				}
			}
			if !strings.Contains(svg, `width="900"`) {
				t.Errorf("not 900 wide:\n%s", svg)
			}
		})
	}
}

// svgTexts parses svg as XML and returns the text of its text elements.
func svgTexts(svg string) ([]string, error) {
	d := xml.NewDecoder(strings.NewReader(svg))
	var texts []string
	var root string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if root != "svg" {
		return nil, fmt.Errorf("root element %q, want svg", root)
	}
	return texts, nil
}

func TestChartRowsQueengateFirst(t *testing.T) {
	t.Parallel()
	targets := slices.Clone(testTargets)
	slices.Reverse(targets)
	r := newTestReport(targets, 3)
	rows := chartRows(r)
	var got []string
	for _, row := range rows {
		got = append(got, row.label)
	}
	want := []string{"queengate", "ceiling", "jetstream", "naive"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
	// ceiling's rounds ran at 90%, 100% and 110% of its median.
	if c := rows[1]; c.rate != 1_200_000 || c.low != 1_080_000 || math.Abs(c.high-1_320_000) > 1e-6 {
		t.Errorf("ceiling: rate %v, whisker %v to %v", c.rate, c.low, c.high)
	}
}

func TestChartNiceTicks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		top  float64
		n    int
		want []float64
	}{
		{100, 5, []float64{0, 20, 40, 60, 80, 100}},
		{95, 5, []float64{0, 20, 40, 60, 80, 100}},
		{101, 5, []float64{0, 50, 100, 150}},
		{1234, 4, []float64{0, 500, 1000, 1500}},
		{1.2e6, 5, []float64{0, 5e5, 1e6, 1.5e6}},
		{1, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0.37, 4, []float64{0, 0.1, 0.2, 0.3, 0.4}},
		{3, 10, []float64{0, 0.5, 1, 1.5, 2, 2.5, 3}},
		{7, 0, []float64{0, 10}},
		{0, 5, []float64{0, 1}},
		{-3, 5, []float64{0, 1}},
		{math.NaN(), 5, []float64{0, 1}},
		{math.Inf(1), 5, []float64{0, 1}},
	} {
		if got := niceTicks(tc.top, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("niceTicks(%v, %d) = %v, want %v", tc.top, tc.n, got, tc.want)
		}
	}
}

func TestChartDecadeTicks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lowest, highest float64
		want            []float64
	}{
		{0.25, 37, []float64{0.1, 1, 10, 100}},
		{2, 3, []float64{1, 10}},
		{1, 1, []float64{1, 10}},
		{1e-6, 0.5, []float64{0.001, 0.01, 0.1, 1}},
		{0.3, 90_000, []float64{0.1, 1, 10, 100, 1000, 10_000, 100_000}},
		{math.Inf(1), 0, []float64{0.1, 1}},
	} {
		if got := decadeTicks(tc.lowest, tc.highest); !slices.Equal(got, tc.want) {
			t.Errorf("decadeTicks(%v, %v) = %v, want %v", tc.lowest, tc.highest, got, tc.want)
		}
	}
}

// TestReportReplication: with --replication, the workload line names the
// mode and its synchronous_commit, a line per target gives the primary's
// and the standby's CPU (in the table and the Markdown), and the JSON
// keeps them; without it, none of that shows.
func TestReportReplication(t *testing.T) {
	t.Parallel()
	r := newTestReport(testTargets[:1], 3)
	var plain bytes.Buffer
	if err := WriteTable(&plain, r); err != nil {
		t.Fatal(err)
	}
	if s := plain.String(); strings.Contains(s, "replication") || strings.Contains(s, "PostgreSQL CPU s/M msgs,") {
		t.Errorf("no --replication, yet the table speaks of it:\n%s", s)
	}
	r.Workload.Replication = bench.ReplicationRemoteApply
	r.Medians[0].PrimaryCPUPerMillion, r.Medians[0].StandbyCPUPerMillion = 2.5, 0.375
	wantLines := []string{"replication remote_apply (synchronous_commit remote_apply)",
		"PostgreSQL CPU s/M msgs, queengate: primary 2.50, standby 0.38"}
	for _, write := range []func(io.Writer, *bench.Report) error{WriteTable, WriteMarkdown} {
		var b bytes.Buffer
		if err := write(&b, r); err != nil {
			t.Fatal(err)
		}
		for _, want := range wantLines {
			if !strings.Contains(b.String(), want) {
				t.Errorf("no %q in:\n%s", want, b.String())
			}
		}
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Replication": "remote_apply"`, `"primaryCpuSecondsPerMillion": 2.5`, `"standbyCpuSecondsPerMillion": 0.375`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON without %s", want)
		}
	}
}
