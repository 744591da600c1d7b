package verify

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The failover half of the verifier. With asynchronous replication a
// failover loses the commits the standby had not received: messages
// answered as stored, acks, dead-letter moves; and the new primary hands
// the lost offsets out again. Those losses are what asynchronous
// replication costs, so they are counted, not judged; everything a
// failover cannot explain still is a violation. A loss is explained only
// by a failover whose standby had not received the offset (Failover.Kept)
// and that promoted it after the answer came: an answer is the gateway's
// word on what the primary held then; an answer that came once the
// standby took writes speaks of the new primary, and must hold there
// unless a later failover cut it. (A gateway answering from what it
// knew of the old primary after the promotion, a stale cache, is the
// fault the check exists for.)

// Failover is one promotion of a standby during the run.
type Failover struct {
	Stopping time.Time // the old primary was told to stop, or killed
	Stopped  time.Time // it had exited
	Promoted time.Time // the standby took writes
	// Kept is, by partition name, the end of the queue's log on the
	// standby when it was promoted: offsets below it survived, offsets
	// from it on were lost if the old primary had them. A partition
	// absent from Kept kept nothing.
	Kept map[string]int64
}

// FailoverFindings are the losses failovers explain: counted, not
// violations.
type FailoverFindings struct {
	Failovers int `json:"failovers"`
	// Lost are (partition, transactionId) answered as stored and absent
	// from the log; LostAnswers the answers naming an offset a failover
	// cut, of those ids or of ids stored again later.
	Lost        int64 `json:"lost"`
	LostAnswers int64 `json:"lostAnswers"`
	// Reused are lost answers whose offset now holds another message: the
	// new primary gave the offset out again, and only the gateway's
	// report of lost messages tells a client that its offset is not its
	// message's any more.
	Reused int64 `json:"reused"`
	// LostDeliveries are deliveries of an offset a later failover cut
	// (the log holds another message there now); LostAcks deliveries
	// after a final ack that a failover between the ack and the pop
	// explains; LostMoves dead-letter moves answered and not stored.
	LostDeliveries int64 `json:"lostDeliveries"`
	LostAcks       int64 `json:"lostAcks"`
	LostMoves      int64 `json:"lostMoves"`
	// LostLeases are messages leased twice at once where a failover
	// between the two pops explains it: the first lease's commit lost,
	// the new primary leased the message again.
	LostLeases int64 `json:"lostLeases"`

	// With the gateways' reports (ReportedLost): Reported is the
	// messages they reported lost, ReportedIDs the distinct messageIds
	// they named; LostIDs the distinct messageIds of the answers naming
	// a cut offset whose message is not there now (each must be among
	// ReportedIDs, or it is Findings.Unreported). BeyondJournal are such
	// answers older than any gateway's journal, InUnnamedReports those
	// that reports naming only their first 1000 may hold; Unchecked the
	// reports a gateway could not make.
	Reported         int64 `json:"reported"`
	ReportedIDs      int64 `json:"reportedIds"`
	LostIDs          int64 `json:"lostIds"`
	BeyondJournal    int64 `json:"beyondJournal"`
	InUnnamedReports int64 `json:"inUnnamedReports"`
	Unchecked        int   `json:"unchecked"`
}

// lossModel says which losses the run's failovers explain. Without
// failovers it explains none: the verifier is the strict one.
type lossModel struct {
	failovers []Failover
	found     *FailoverFindings
	reports   *reportCheck // nil: the gateways' reports are not judged
}

func (m lossModel) on() bool { return len(m.failovers) > 0 }

// cut reports whether a failover promoted after told dropped offset of
// partition: the old primary may have held it, the standby did not.
func (m lossModel) cut(partition string, offset int64, told time.Time) bool {
	_, ok := m.cutBy(partition, offset, told)
	return ok
}

// cutBy is the first failover that cut offset of partition after told.
func (m lossModel) cutBy(partition string, offset int64, told time.Time) (Failover, bool) {
	for _, f := range m.failovers {
		if f.Promoted.After(told) && offset >= f.Kept[partition] {
			return f, true
		}
	}
	return Failover{}, false
}

// ackLost reports whether a failover may have lost an ack answered at
// answered before a pop sent at asked: the old primary died before the
// pop, and the standby took over only after the ack's answer came (the
// ack's commit came before its answer, and the standby may lack it).
func (m lossModel) ackLost(answered, asked time.Time) bool {
	for _, f := range m.failovers {
		if f.Stopping.Before(asked) && f.Promoted.After(answered) {
			return true
		}
	}
	return false
}

// leaseLost reports whether a failover may have lost the earlier of two
// leases of one message before the later one was granted: the old
// primary died after the earlier pop was sent and before the later
// pop's answer came.
func (m lossModel) leaseLost(a, b Lease) bool {
	if b.Granted.Before(a.Granted) {
		a, b = b, a
	}
	for _, f := range m.failovers {
		if f.Stopped.After(a.Asked) && f.Stopping.Before(b.Granted) {
			return true
		}
	}
	return false
}

// VerifyFailovers is Verify for a run with failovers under asynchronous
// replication: the losses the failovers explain are counted in
// Findings.Failover instead of being violations. With reported (what the
// gateways reported lost; nil: not judged), an answer naming an offset a
// failover cut whose message is not there now and that no report named
// is a violation (Findings.Unreported). With no failovers it is Verify.
func VerifyFailovers(ctx context.Context, pgURL, queue string, exp Expected, con *Consumed, failovers []Failover, reported *ReportedLost) (Findings, error) {
	return verify(ctx, pgURL, queue, exp, con, failovers, reported)
}

// LogEnds is, by partition name, the end of queue's log (the next offset
// to store) in the database at pgURL, a standby's as well as a primary's:
// what a failover to it keeps.
func LogEnds(ctx context.Context, pgURL, queue string) (map[string]int64, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT p.name, max(s.end_offset) + 1
		  FROM queen.queues q
		  JOIN queen.log_partitions p ON p.queue_id = q.id
		  JOIN queen.log_segments s ON s.partition_id = p.id
		 WHERE q.name = $1
		 GROUP BY p.name`, queue)
	if err != nil {
		return nil, err
	}
	ends := map[string]int64{}
	for rows.Next() {
		var (
			name string
			end  int64
		)
		if err := rows.Scan(&name, &end); err != nil {
			return nil, err
		}
		ends[name] = end
	}
	return ends, rows.Err()
}
