// Package report owns what queenbench concludes and prints of its runs:
// the statistics (nearest-rank percentiles, medians, the per-target
// medians over rounds, queengate's throughput ratios, the cache budget
// checks) and the report's renderings: the aligned table for a terminal,
// GitHub Markdown, JSON, and the SVG chart of throughput and latency. It
// reads results (package bench) and never runs anything.
package report
