// Package bench is the vocabulary queenbench's packages share: the
// Workload producers send, a Batch (one request), the Target interface
// every system under test implements and the Figures it reports of its
// own cost, a run's Result, and the Report with its ratios and checks;
// and the rule of target names (queengate@N is a fleet of N gateways).
// It owns no behaviour beyond that: the targets live in bench/target,
// the processes queenbench starts in bench/proc, the report's rendering
// and statistics in bench/report.
package bench
