package sidebyside

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/queengate/queengate/internal/bench/proc"
	"github.com/queengate/queengate/internal/bench/report"
	"github.com/queengate/queengate/internal/bench/target"
)

// What issue 34's consume targets are judged by: each consume round's CPU
// split by process, per message and per cycle, and the fixed cost of a
// cycle and the cost of a message fitted over the batch sizes. A cycle
// is one request of a consumer: queengate, a pop (carrying the previous
// batch's ack); JetStream, a fetch and the acks of what it brought.

// loadGenerator names queenbench's own process: its consumers.
const loadGenerator = "load generator"

// The totals of a split: the serving processes (what
// consumeBenchResult.CPUMicrosPerMessage counts), and those with the load
// generator.
const (
	servingTotal = "serving processes"
	wholeTotal   = "all, with the load generator"
)

// meteredProcess is a process, or a set of them, whose CPU a round splits
// out.
type meteredProcess struct {
	name    string
	serving bool // false: the load generator
	meter   cpuMeter
}

// splitMeter meters the processes of one side, one by one.
type splitMeter []meteredProcess

// queengateSplit meters the load generator, the gateways, their NATS
// server (a process of its own) and PostgreSQL's process tree (when
// postmaster is known: it may run elsewhere).
func queengateSplit(env *proc.Self, postmaster int) splitMeter {
	gateways := env.GatewayPIDs()
	name := "gateway"
	if len(gateways) > 1 {
		name = fmt.Sprint(len(gateways), " gateways")
	}
	m := splitMeter{
		{name: loadGenerator, meter: cpuMeter{own: true}},
		{name: name, serving: true, meter: cpuMeter{pids: gateways}},
		{name: "nats-server", serving: true, meter: cpuMeter{pids: []int{env.NATSPID()}}},
	}
	if postmaster > 0 {
		m = append(m, meteredProcess{name: "PostgreSQL", serving: true, meter: cpuMeter{postmaster: postmaster}})
	}
	return m
}

// jetStreamSplit meters the load generator and the JetStream server.
func jetStreamSplit(js *target.JetStream) splitMeter {
	return splitMeter{
		{name: loadGenerator, meter: cpuMeter{own: true}},
		{name: "nats-server (JetStream)", serving: true, meter: cpuMeter{pids: []int{js.Server.PID()}}},
	}
}

// read is each process's CPU seconds so far.
func (m splitMeter) read() ([]float64, error) {
	out := make([]float64, len(m))
	for i, p := range m {
		var err error
		if out[i], err = p.meter.seconds(); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return out, nil
}

// since is each process's CPU from the reading before to now, over
// messages consumed in cycles.
func (m splitMeter) since(before []float64, messages, cycles int64) ([]ProcessCPU, error) {
	after, err := m.read()
	if err != nil {
		return nil, err
	}
	split := make([]ProcessCPU, len(m))
	for i, p := range m {
		split[i] = processCPU(p.name, p.serving, after[i]-before[i], messages, cycles)
	}
	return split, nil
}

// ProcessCPU is the CPU a process (or a total) took over a round, in
// all and per message and cycle.
type ProcessCPU struct {
	Process          string  `json:"process"`
	Serving          bool    `json:"serving"` // false: the load generator, or a total with it
	Seconds          float64 `json:"seconds"`
	MicrosPerMessage float64 `json:"microsPerMessage"`
	MicrosPerCycle   float64 `json:"microsPerCycle"`
}

func processCPU(name string, serving bool, seconds float64, messages, cycles int64) ProcessCPU {
	return ProcessCPU{Process: name, Serving: serving, Seconds: seconds,
		MicrosPerMessage: seconds / float64(max(messages, 1)) * 1e6, MicrosPerCycle: seconds / float64(max(cycles, 1)) * 1e6}
}

// withTotals is split followed by its serving processes' total and the
// total of all.
func withTotals(split []ProcessCPU, messages, cycles int64) []ProcessCPU {
	var serving, all float64
	for _, p := range split {
		all += p.Seconds
		if p.Serving {
			serving += p.Seconds
		}
	}
	return append(slices.Clip(split), processCPU(servingTotal, true, serving, messages, cycles), processCPU(wholeTotal, false, all, messages, cycles))
}

// servingMicrosPerMessage is the serving processes' CPU per message of a
// round's split.
func servingMicrosPerMessage(split []ProcessCPU, messages int64) float64 {
	seconds := 0.0
	for _, p := range split {
		if p.Serving {
			seconds += p.Seconds
		}
	}
	return seconds / float64(max(messages, 1)) * 1e6
}

// ShapeSplit is one side's CPU by process in a shape, medians of its
// rounds, the totals last.
type ShapeSplit struct {
	Shape  string `json:"shape"`
	Batch  int    `json:"batch"`
	Target string `json:"target"`
	// InFit: a batch shape over the workload's partitions, a point of the
	// fit of a cycle's cost.
	InFit            bool         `json:"inFit"`
	Cycles           float64      `json:"cycles"`
	MessagesPerCycle float64      `json:"messagesPerCycle"`
	Processes        []ProcessCPU `json:"processes"`
}

// summariseSplits is each side's ShapeSplit of a shape's rounds.
func summariseSplits(sh consumeShape, results []consumeBenchResult) []ShapeSplit {
	var out []ShapeSplit
	for _, side := range []string{"queengate", "jetstream"} {
		var rounds []consumeBenchResult
		for _, r := range results {
			if r.Target == side {
				rounds = append(rounds, r)
			}
		}
		if len(rounds) > 0 {
			out = append(out, summariseSplit(sh, side, rounds))
		}
	}
	return out
}

// summariseSplit takes the medians of one side's rounds of a shape.
func summariseSplit(sh consumeShape, side string, rounds []consumeBenchResult) ShapeSplit {
	median := func(f func(consumeBenchResult) float64) float64 {
		xs := make([]float64, len(rounds))
		for i, r := range rounds {
			xs[i] = f(r)
		}
		return report.MedianFloat(xs)
	}
	s := ShapeSplit{Shape: sh.name, Batch: sh.batch, Target: side, InFit: sh.inFit,
		Cycles:           median(func(r consumeBenchResult) float64 { return float64(r.Cycles) }),
		MessagesPerCycle: median(func(r consumeBenchResult) float64 { return float64(r.Messages) / float64(max(r.Cycles, 1)) })}
	for i, p := range withTotals(rounds[0].Split, rounds[0].Messages, rounds[0].Cycles) {
		row := func(r consumeBenchResult) ProcessCPU { return withTotals(r.Split, r.Messages, r.Cycles)[i] }
		p.Seconds = median(func(r consumeBenchResult) float64 { return row(r).Seconds })
		p.MicrosPerMessage = median(func(r consumeBenchResult) float64 { return row(r).MicrosPerMessage })
		p.MicrosPerCycle = median(func(r consumeBenchResult) float64 { return row(r).MicrosPerCycle })
		s.Processes = append(s.Processes, p)
	}
	return s
}

// CycleFit is a process's (or a total's) CPU per message fitted as
// PerMessageMicros + PerCycleMicros ÷ batch over Batches.
type CycleFit struct {
	Target           string  `json:"target"`
	Process          string  `json:"process"`
	Batches          []int   `json:"batches"`
	PerCycleMicros   float64 `json:"perCycleMicros"`   // the fixed cost of a cycle
	PerMessageMicros float64 `json:"perMessageMicros"` // the cost of each message
	// MaxMissMicros is the largest distance of a measured µs/msg from the
	// fitted line: how well two terms explain the points.
	MaxMissMicros float64 `json:"maxMissMicros"`
}

// fitCycles fits each side's processes over its splits in the fit, when
// they have at least two batch sizes.
func fitCycles(splits []ShapeSplit) []CycleFit {
	var out []CycleFit
	for _, side := range []string{"queengate", "jetstream"} {
		var points []ShapeSplit
		for _, s := range splits {
			if s.Target == side && s.InFit {
				points = append(points, s)
			}
		}
		slices.SortFunc(points, func(a, b ShapeSplit) int { return a.Batch - b.Batch })
		if len(points) == 0 {
			continue
		}
		batches := make([]int, len(points))
		for i, s := range points {
			batches[i] = s.Batch
		}
		for k, p := range points[0].Processes {
			perMessage := make([]float64, len(points))
			for i, s := range points {
				perMessage[i] = s.Processes[k].MicrosPerMessage
			}
			if a, b, ok := fitCycleCost(batches, perMessage); ok {
				out = append(out, CycleFit{Target: side, Process: p.Process, Batches: batches, PerCycleMicros: b, PerMessageMicros: a,
					MaxMissMicros: largestMiss(batches, perMessage, a, b)})
			}
		}
	}
	return out
}

// fitCycleCost fits microsPerMessage[i] = perMessage + perCycle ÷
// batches[i] by least squares; ok is false unless there are two batch
// sizes or more to tell the terms apart.
func fitCycleCost(batches []int, microsPerMessage []float64) (perMessage, perCycle float64, ok bool) {
	if len(slices.Compact(slices.Sorted(slices.Values(batches)))) < 2 {
		return 0, 0, false
	}
	n := float64(len(batches))
	var sx, sy, sxx, sxy float64
	for i, b := range batches {
		x, y := 1/float64(b), microsPerMessage[i]
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	perCycle = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return (sy - perCycle*sx) / n, perCycle, true
}

// largestMiss is the largest distance of microsPerMessage[i] from
// perMessage + perCycle ÷ batches[i].
func largestMiss(batches []int, microsPerMessage []float64, perMessage, perCycle float64) float64 {
	miss := 0.0
	for i, b := range batches {
		miss = max(miss, math.Abs(microsPerMessage[i]-perMessage-perCycle/float64(b)))
	}
	return miss
}

// writeSplitAndFit prints the CPU by process of every shape, then the
// fit, or why there is none.
func writeSplitAndFit(out io.Writer, rounds int, rep *ConsumeReport) {
	fmt.Fprintf(out, "\n### CPU by process, medians of %d rounds\n\n", rounds)
	fmt.Fprint(out, "A cycle is one request of a consumer: queengate, a pop carrying the previous batch's ack; JetStream, a fetch and the acks of its messages "+
		"(empty ones included). The load generator is queenbench's own process (its consumers); the serving processes are what CPU µs/msg above counts.\n\n")
	fmt.Fprintln(out, "| shape | target | process | µs/msg | µs/cycle | cycles | msg/cycle |\n|---|---|---|---:|---:|---:|---:|")
	for _, s := range rep.Splits {
		for _, p := range s.Processes {
			name := p.Process
			if name == servingTotal || name == wholeTotal {
				name = "**" + name + "**"
			}
			fmt.Fprintf(out, "| %s | %s | %s | %.1f | %.0f | %.0f | %.1f |\n", s.Shape, s.Target, name, p.MicrosPerMessage, p.MicrosPerCycle,
				s.Cycles, s.MessagesPerCycle)
		}
	}
	if len(rep.Fits) == 0 {
		fmt.Fprintln(out, "\nNo fit of a cycle's cost: it needs two batch sizes or more (--consume-batch 10,100,1000).")
		return
	}
	fmt.Fprintf(out, "\n### Fixed cost per cycle and cost per message: µs/msg = a + b ÷ batch, least squares over batches %s\n\n", joinInts(rep.Fits[0].Batches))
	fmt.Fprintln(out, "| target | process | fixed cost per cycle b µs | per message a µs | largest miss µs/msg |\n|---|---|---:|---:|---:|")
	for _, f := range rep.Fits {
		fmt.Fprintf(out, "| %s | %s | %.0f | %.2f | %.2f |\n", f.Target, f.Process, f.PerCycleMicros, f.PerMessageMicros, f.MaxMissMicros)
	}
	fmt.Fprintln(out)
	for _, f := range rep.Fits {
		if f.Process == servingTotal || f.Process == wholeTotal {
			fmt.Fprintf(out, "%s, %s: fixed cost per cycle %.0f µs, per message %.2f µs\n", f.Target, f.Process, f.PerCycleMicros, f.PerMessageMicros)
		}
	}
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
