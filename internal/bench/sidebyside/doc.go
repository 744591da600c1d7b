// Package sidebyside owns the read and consume scenarios: each stores
// the same messages in queengate and in JetStream, started here, then
// measures them side by side, round by round (reading everything back;
// consuming and acknowledging it in shapes of batch size, partitions and
// fan-out, exactly once per group), the pushes beside readers or
// consumers, and what idle long polls cost; and prints its own report.
package sidebyside
