// Package queengate is queengate's wire contract in Go, and a client for
// producers, consumers and operators: subjects and name rules, the answers
// and their error codes, and a Client that pushes (request-reply, or
// fire-and-forget with the answers read on the ack subject and matched to
// their requests), schedules and cancels timers, configures and reads
// queues, and pops, acknowledges, renews and releases over NATS (package
// consumer runs a consumer on those calls). docs/protocol.md and
// docs/admin-api.md describe the same contract in words; the gateway,
// queenctl and queenbench speak it through this package.
package queengate

import (
	"fmt"
	"strings"
)

const (
	// DefaultPrefix starts every subject unless configured otherwise.
	DefaultPrefix = "queen"
	// DefaultPartition is the partition of a push whose subject names
	// none.
	DefaultPartition = "Default"
	// MaxNameBytes is the longest queue or partition name.
	MaxNameBytes = 128
	// MaxTxnIDBytes is the longest transactionId accepted.
	MaxTxnIDBytes = 256
	// DefaultMaxBatch is how many messages one push may carry unless the
	// gateway is configured otherwise.
	DefaultMaxBatch = 1000
)

// ValidName reports whether s is a valid queue or partition name: 1 to
// 128 bytes of [A-Za-z0-9_-], one NATS subject token.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// NameRule says what ValidName requires, for error messages.
const NameRule = "1-128 bytes of [A-Za-z0-9_-]"

// ValidPrefix checks a subject prefix: one or more dot-separated tokens,
// each a valid name.
func ValidPrefix(p string) error {
	for _, tok := range strings.Split(p, ".") {
		if !ValidName(tok) {
			return fmt.Errorf("subject prefix %q: each dot-separated token must be %s", p, NameRule)
		}
	}
	return nil
}

// Subjects builds the gateway's subjects under a prefix.
type Subjects struct{ Prefix string }

// Push is the subject of a push to a partition; partition "" is the
// Default partition's short form, <prefix>.push.<queue>.
func (s Subjects) Push(queue, partition string) string {
	if partition == "" {
		return s.Prefix + ".push." + queue
	}
	return s.Prefix + ".push." + queue + "." + partition
}

// Ack is where the answers of fire-and-forget pushes to a partition are
// published.
func (s Subjects) Ack(queue, partition string) string {
	return s.Prefix + ".ack." + queue + "." + partition
}

// Timer is the subject that schedules a timer for a partition.
func (s Subjects) Timer(queue, partition string) string {
	return s.Prefix + ".timer." + queue + "." + partition
}

// TimerCancel cancels a timer; TimerList lists pending ones.
func (s Subjects) TimerCancel() string { return s.Prefix + ".timer.cancel" }
func (s Subjects) TimerList() string   { return s.Prefix + ".timer.list" }

// Configure, QueuesList, QueuesGet and Status are the operator API.
func (s Subjects) Configure() string             { return s.Prefix + ".configure" }
func (s Subjects) QueuesList() string            { return s.Prefix + ".queues.list" }
func (s Subjects) QueuesGet(queue string) string { return s.Prefix + ".queues.get." + queue }
func (s Subjects) Status() string                { return s.Prefix + ".status" }

// Read is where a partition's messages are read from an offset.
func (s Subjects) Read(queue, partition string) string {
	return s.Prefix + ".read." + queue + "." + partition
}

// MessageGet is where one message is fetched by id or transactionId.
func (s Subjects) MessageGet() string { return s.Prefix + ".message.get" }

// Pop is where a consumer asks for messages of a queue: of any
// partition with work, or of one (partition not "").
func (s Subjects) Pop(queue, partition string) string {
	if partition == "" {
		return s.Prefix + ".consume.pop." + queue
	}
	return s.Prefix + ".consume.pop." + queue + "." + partition
}

// ConsumeAck, Renew and Release settle and keep a lease on a partition.
func (s Subjects) ConsumeAck(queue, partition string) string {
	return s.Prefix + ".consume.ack." + queue + "." + partition
}
func (s Subjects) Renew(queue, partition string) string {
	return s.Prefix + ".consume.renew." + queue + "." + partition
}
func (s Subjects) Release(queue, partition string) string {
	return s.Prefix + ".consume.release." + queue + "." + partition
}

// Groups lists a queue's consumer groups with their lag.
func (s Subjects) Groups(queue string) string { return s.Prefix + ".consume.groups." + queue }

// Committed is where gateways announce that a queue has new messages
// (long-polling pops wait for it).
func (s Subjects) Committed(queue string) string { return s.Prefix + ".committed." + queue }

// Explain is where a transactionId's verdict is explained.
func (s Subjects) Explain(queue, partition string) string {
	return s.Prefix + ".explain." + queue + "." + partition
}
