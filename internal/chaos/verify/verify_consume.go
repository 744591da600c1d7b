package verify

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The consumer half of the verifier: what the consumers of each group
// saw (their leases, what was delivered under each, what they
// acknowledged and the answers) against the log, the groups' cursors and
// the dead-letter queue, read with the verifier's own SQL.
//
// Times: a lease's end is the server's (leaseUntil); everything else is
// when a consumer sent a request or got its answer. The machine is one,
// so the clocks are one, and a check only counts what these times prove.

// Consumed is what the consumers saw.
type Consumed struct {
	Groups     []string
	Leases     []Lease
	Deliveries []Delivery
	Acks       []AckSent
	// Moved is, by group, how many dead letters the pops' and acks'
	// answers said they moved (answers lost are not counted).
	Moved map[string]int64
	// Crashes are the poison messages consumers died on, before a word:
	// each must end dead-lettered by its group, its leases having run out
	// unheard (docs/protocol.md, "What an attempt is").
	Crashes []Crash
}

// Crash is one delivery of a poison message a consumer died on.
type Crash struct {
	Group, Partition string
	Offset           int64
	ID               string // its transactionId
}

// Lease is one lease a pop granted, as the consumer's answers reported
// it. It was surely held from Granted until the earlier of Until and
// Settling: nothing but its own consumer's ack or release, or running
// out, ends a lease.
type Lease struct {
	Group, Consumer, Partition, ID string
	Request                        int64     // the pop that granted it
	Asked                          time.Time // that pop was sent
	Granted                        time.Time // its answer arrived
	Until                          time.Time // the latest end an answer reported (the pop's or a renewal's)
	Settling                       time.Time // its first ack or release was sent; zero: never
}

// heldUntil is when the lease may have ended first.
func (l Lease) heldUntil() time.Time {
	if !l.Settling.IsZero() && l.Settling.Before(l.Until) {
		return l.Settling
	}
	return l.Until
}

// Delivery is one message delivered under a lease (an index of
// Consumed.Leases).
type Delivery struct {
	Lease  int
	Offset int64
	ID     string // its transactionId
}

// AckSent is one ack item a consumer sent, with the result its answer
// gave ("" when no answer came).
type AckSent struct {
	Group, Partition string
	Offset           int64
	Completed        bool // the item's status: completed, or failed
	Result           string
	Answered         time.Time
	Request          int64 // the pop that carried it; 0: an ack of its own
}

// final reports whether the answer says the message is settled for good
// for the group: completed, or moved to the dead-letter queue. A failed
// item's alreadyAcked is not: a retried batch's failure, settled as
// failed under the same lease, answers it too.
func (a AckSent) final() bool {
	return a.Result == "deadLettered" || a.Completed && (a.Result == "acked" || a.Result == "alreadyAcked")
}

// GroupFigures are one group's consumption figures.
type GroupFigures struct {
	Group        string `json:"group"`
	Leases       int64  `json:"leases"`
	Deliveries   int64  `json:"deliveries"`
	Messages     int64  `json:"messages"` // distinct messages delivered
	Redeliveries int64  `json:"redeliveries"`
	DeadLetters  int64  `json:"deadLetters"`
	Unsettled    int64  `json:"unsettled"` // messages past the group's cursor at the end
	Poison       int64  `json:"poison"`    // distinct messages its consumers died on, each dead-lettered
}

// ConsumeFindings are the consumer checks' figures and violations.
type ConsumeFindings struct {
	Groups []GroupFigures `json:"groups"`

	Unconsumed        int64 `json:"unconsumed"`        // (message answered as stored, group): never delivered to the group
	Undone            int64 `json:"undone"`            // deliveries of a message its group had settled for good before the pop was sent
	DoubleLeased      int64 `json:"doubleLeased"`      // (message, group) delivered under two leases surely held at once
	DeadLetteredTwice int64 `json:"deadLetteredTwice"` // (message, group) dead-lettered twice, or dead-lettered and completed; or moves reported beyond the dead letters stored
	Skipped           int64 `json:"skipped"`           // (message, group) behind the cursor, never completed nor dead-lettered
	Misdelivered      int64 `json:"misdelivered"`      // a delivery or dead letter naming a message unlike the log's at its offset
	PoisonKept        int64 `json:"poisonKept"`        // (message, group) its consumers died on, not dead-lettered for leases run out unheard
}

// Violations is the number of consumer violations found.
func (c ConsumeFindings) Violations() int64 {
	return c.Unconsumed + c.Undone + c.DoubleLeased + c.DeadLetteredTwice + c.Skipped + c.Misdelivered + c.PoisonKept
}

// Unsettled is the messages past some group's cursor at the end.
func (c ConsumeFindings) Unsettled() int64 {
	var n int64
	for _, g := range c.Groups {
		n += g.Unsettled
	}
	return n
}

// consumeIndex is Consumed by group and partition.
type consumeIndex struct {
	con        *Consumed
	deliveries map[string]map[string][]int // group → partition → indexes
	acks       map[string]map[string][]int
	crashes    map[string]map[string][]int // group → partition → indexes of Consumed.Crashes
	cursors    map[string]map[string]int64 // group → partition → next offset
	loss       lossModel
}

func indexConsumed(con *Consumed) *consumeIndex {
	ix := &consumeIndex{con: con, deliveries: map[string]map[string][]int{}, acks: map[string]map[string][]int{},
		crashes: map[string]map[string][]int{}}
	add := func(m map[string]map[string][]int, group, partition string, i int) {
		if m[group] == nil {
			m[group] = map[string][]int{}
		}
		m[group][partition] = append(m[group][partition], i)
	}
	for i, d := range con.Deliveries {
		l := con.Leases[d.Lease]
		add(ix.deliveries, l.Group, l.Partition, i)
	}
	for i, a := range con.Acks {
		add(ix.acks, a.Group, a.Partition, i)
	}
	for i, c := range con.Crashes {
		add(ix.crashes, c.Group, c.Partition, i)
	}
	return ix
}

// partitionLog is one partition's log as the consumer checks need it.
type partitionLog struct {
	name     string
	id       int64
	end      int64            // offsets below it are stored
	byOffset map[int64]string // transactionId at each offset
	answered map[string]bool  // transactionIds answered as stored
	held     map[string]bool  // transactionIds in the log
}

func newPartitionLog(name string, stored map[key][]row, answers []Answer) partitionLog {
	p := partitionLog{name: name, id: -1, byOffset: map[int64]string{}, answered: map[string]bool{}, held: map[string]bool{}}
	for k, rows := range stored {
		p.held[k.id] = true
		for _, r := range rows {
			p.byOffset[r.offset] = k.id
			p.id = r.partitionID
			p.end = max(p.end, r.offset+1)
		}
	}
	for _, a := range answers {
		p.answered[a.ID] = true
	}
	return p
}

// checkConsumed checks every group on one partition; dead are its dead
// letters in the dead-letter queue, by transactionId.
func (ix *consumeIndex) checkConsumed(f *ConsumeFindings, p partitionLog, dead map[key][]row, example func(string, ...any)) {
	for gi, group := range ix.con.Groups {
		g := &f.Groups[gi]
		delivered := ix.checkDeliveries(f, g, group, p, example)
		for id := range p.answered {
			if ix.loss.on() && !p.held[id] {
				continue // lost in a failover: counted with the producers' losses
			}
			if !delivered[id] {
				f.Unconsumed++
				example("group %s: %s/%s answered as stored, never delivered", group, p.name, id)
			}
		}
		ix.checkSettled(f, g, group, p, dead, example)
		ix.checkPoison(f, g, group, p, dead, example)
	}
}

// checkPoison checks that every message group's consumers died on was
// dead-lettered by the group, its last error saying its leases ran out
// unheard: maxUnheardDeliveries counted them, and maxAttempts ended it.
func (ix *consumeIndex) checkPoison(f *ConsumeFindings, g *GroupFigures, group string, p partitionLog, dead map[key][]row, example func(string, ...any)) {
	whys := map[int64]string{} // offset → the error of its dead letter by group
	for k, rows := range dead {
		if dg, mid, _ := strings.Cut(k.id, ":"); dg == group {
			if pid, off, ok := ParseMessageID(mid); ok && pid == p.id {
				whys[off] = deadLetterError(rows[0].data)
			}
		}
	}
	seen := map[int64]bool{}
	for _, i := range ix.crashes[group][p.name] {
		c := ix.con.Crashes[i]
		if seen[c.Offset] || p.byOffset[c.Offset] != c.ID {
			continue // counted once; a delivery unlike the log's is misdelivered
		}
		seen[c.Offset] = true
		why, ok := whys[c.Offset]
		if ok && strings.HasPrefix(why, "lease ran out unheard ") {
			g.Poison++
			continue
		}
		f.PoisonKept++
		example("group %s: %s offset %d (%s), which its consumers died on, not dead-lettered for leases run out unheard (dead letter: %v, error %q)",
			group, p.name, c.Offset, c.ID, ok, why)
	}
}

// checkDeliveries checks what group was delivered on p: each delivery
// names the log's message, comes after no final settlement of it, and
// under no lease overlapping another that held it. It returns the
// transactionIds delivered.
func (ix *consumeIndex) checkDeliveries(f *ConsumeFindings, g *GroupFigures, group string, p partitionLog, example func(string, ...any)) map[string]bool {
	byOffset := map[int64][]int{} // offset → leases it was delivered under
	for _, i := range ix.deliveries[group][p.name] {
		d := ix.con.Deliveries[i]
		g.Deliveries++
		if id, ok := p.byOffset[d.Offset]; !ok || id != d.ID {
			if ix.loss.on() && ix.loss.cut(p.name, d.Offset, ix.con.Leases[d.Lease].Granted) {
				ix.loss.found.LostDeliveries++
				continue
			}
			f.Misdelivered++
			example("group %s: %s offset %d delivered as %s, the log holds %q there", group, p.name, d.Offset, d.ID, id)
			continue
		}
		byOffset[d.Offset] = append(byOffset[d.Offset], d.Lease)
	}
	finals := map[int64][]AckSent{}
	for _, i := range ix.acks[group][p.name] {
		if a := ix.con.Acks[i]; a.final() {
			finals[a.Offset] = append(finals[a.Offset], a)
		}
	}
	delivered := map[string]bool{}
	for off, leases := range byOffset {
		delivered[p.byOffset[off]] = true
		g.Messages++
		g.Redeliveries += int64(len(leases) - 1)
		for _, li := range leases {
			if a, ok := settledBefore(ix.con.Leases[li], finals[off]); ok {
				if ix.loss.on() && ix.loss.ackLost(a.Answered, ix.con.Leases[li].Asked) {
					ix.loss.found.LostAcks++
					continue
				}
				f.Undone++
				example("group %s: %s offset %d delivered under lease %s (pop sent %s) after an ack answered %s (%s)",
					group, p.name, off, ix.con.Leases[li].ID, stamp(ix.con.Leases[li].Asked), a.Result, stamp(a.Answered))
			}
		}
		if a, b, ok := overlapping(ix.con.Leases, leases); ok {
			if ix.loss.on() && ix.loss.leaseLost(a, b) {
				ix.loss.found.LostLeases++
				continue
			}
			f.DoubleLeased++
			example("group %s: %s offset %d leased at once to %s (lease %s, %s–%s) and %s (lease %s, %s–%s)", group, p.name, off,
				a.Consumer, a.ID, stamp(a.Granted), stamp(a.heldUntil()), b.Consumer, b.ID, stamp(b.Granted), stamp(b.heldUntil()))
		}
	}
	return delivered
}

// settledBefore finds a final settlement the lease's pop must have seen:
// answered before the pop was sent, or carried by that very pop (settled
// before it delivers).
func settledBefore(l Lease, finals []AckSent) (AckSent, bool) {
	for _, a := range finals {
		if a.Request != 0 && a.Request == l.Request || a.Answered.Before(l.Asked) {
			return a, true
		}
	}
	return AckSent{}, false
}

// overlapping finds two of the leases that were surely held at the same
// time: each from its pop's answer until its first ack or release or its
// reported end, whichever came first.
func overlapping(all []Lease, leases []int) (Lease, Lease, bool) {
	for i, x := range leases {
		for _, y := range leases[i+1:] {
			a, b := all[x], all[y]
			if a.ID == b.ID {
				continue
			}
			from, to := a.Granted, a.heldUntil()
			if b.Granted.After(from) {
				from = b.Granted
			}
			if b.heldUntil().Before(to) {
				to = b.heldUntil()
			}
			if from.Before(to) {
				return a, b, true
			}
		}
	}
	return Lease{}, Lease{}, false
}

// checkSettled checks group's cursor on p and its dead letters: every
// message behind the cursor was completed by a consumer or
// dead-lettered, and no message was dead-lettered twice or after it was
// completed.
func (ix *consumeIndex) checkSettled(f *ConsumeFindings, g *GroupFigures, group string, p partitionLog, dead map[key][]row, example func(string, ...any)) {
	completedSent := map[int64]bool{}
	completed := map[int64]bool{}
	for _, i := range ix.acks[group][p.name] {
		a := ix.con.Acks[i]
		if a.Completed {
			completedSent[a.Offset] = true
			completed[a.Offset] = completed[a.Offset] || a.Result == "acked" || a.Result == "alreadyAcked"
		}
	}
	deadLettered := map[int64]bool{}
	for k, rows := range dead {
		dg, mid, _ := strings.Cut(k.id, ":")
		if dg != group {
			continue
		}
		pid, off, ok := ParseMessageID(mid)
		if !ok || pid != p.id || !deadLetterNames(rows[0].data, p.byOffset[off]) {
			f.Misdelivered++
			example("group %s: dead letter %s does not name a message of %s as the log holds it: %s", group, k.id, p.name, rows[0].data)
			continue
		}
		g.DeadLetters++
		deadLettered[off] = true
		switch {
		case len(rows) > 1:
			f.DeadLetteredTwice++
			example("group %s: %s offset %d dead-lettered %d times", group, p.name, off, len(rows))
		case completed[off]:
			f.DeadLetteredTwice++
			example("group %s: %s offset %d dead-lettered, and acknowledged completed", group, p.name, off)
		}
	}
	next := ix.cursors[group][p.name]
	g.Unsettled += p.end - min(next, p.end)
	for off := range min(next, p.end) {
		if !completedSent[off] && !deadLettered[off] {
			f.Skipped++
			example("group %s: %s offset %d behind the cursor (%d), never completed nor dead-lettered", group, p.name, off, next)
		}
	}
}

// checkMoves compares the dead letters the answers said they moved with
// those stored: more moved than stored is a message moved twice (the
// dead-letter queue's window would hide the second copy).
func (ix *consumeIndex) checkMoves(f *ConsumeFindings, example func(string, ...any)) {
	for i, group := range ix.con.Groups {
		if moved, stored := ix.con.Moved[group], f.Groups[i].DeadLetters; moved > stored {
			if ix.loss.on() {
				ix.loss.found.LostMoves += moved - stored
				continue
			}
			f.DeadLetteredTwice += moved - stored
			example("group %s: answers said %d dead letters were moved, %d are stored", group, moved, stored)
		}
	}
}

// deadLetterNames reports whether a dead letter's data names the
// transactionId the log holds at its offset.
func deadLetterNames(data, txnID string) bool {
	var d struct {
		TransactionID string `json:"transactionId"`
	}
	return json.Unmarshal([]byte(data), &d) == nil && txnID != "" && d.TransactionID == txnID
}

// deadLetterError is the error a dead letter's data carries.
func deadLetterError(data string) string {
	var d struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(data), &d)
	return d.Error
}

// readCursors is every group's next offset on every partition of queue.
func readCursors(ctx context.Context, conn *pgx.Conn, queue string) (map[string]map[string]int64, error) {
	rows, err := conn.Query(ctx, `
		SELECT g.name, p.name, c.next_offset
		  FROM queen.queues q
		  JOIN queen.consumer_groups g ON g.queue_id = q.id
		  JOIN queen.consumer_cursors c ON c.group_id = g.id
		  JOIN queen.log_partitions p ON p.id = c.partition_id
		 WHERE q.name = $1`, queue)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[string]int64{}
	for rows.Next() {
		var group, partition string
		var next int64
		if err := rows.Scan(&group, &partition, &next); err != nil {
			return nil, err
		}
		if out[group] == nil {
			out[group] = map[string]int64{}
		}
		out[group][partition] = next
	}
	return out, rows.Err()
}

// backlog is how many messages of queue the groups have not consumed:
// the sum over groups and partitions of what lies past the cursor (a
// partition a group has no cursor on yet counts whole).
func Backlog(ctx context.Context, pgURL, queue string, groups []string) (int64, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `
		SELECT coalesce(sum(p.last_offset + 1 - coalesce(c.next_offset, 0)), 0)
		  FROM queen.queues q
		  JOIN queen.log_partitions p ON p.queue_id = q.id
		 CROSS JOIN unnest($2::text[]) AS g(name)
		  LEFT JOIN queen.consumer_groups cg ON cg.queue_id = q.id AND cg.name = g.name
		  LEFT JOIN queen.consumer_cursors c ON c.group_id = cg.id AND c.partition_id = p.id
		 WHERE q.name = $1`, queue, groups).Scan(&n)
	return n, err
}

// deadLetterQueue is queue's dead-letter queue (the short form: the
// scenario's queue names are short).
func deadLetterQueue(queue string) string { return queue + "-dlq" }

// parseMessageID is the partition id and offset a messageId names.
func ParseMessageID(id string) (pid, offset int64, ok bool) {
	hex := strings.ReplaceAll(id, "-", "")
	if len(hex) != 32 {
		return 0, 0, false
	}
	p, err1 := strconv.ParseUint(hex[:16], 16, 63)
	o, err2 := strconv.ParseUint(hex[16:], 16, 63)
	return int64(p), int64(o), err1 == nil && err2 == nil
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }

// startConsumeCheck prepares the consumer checks of con into f.Consume:
// nil when no consumers ran.
func startConsumeCheck(ctx context.Context, conn *pgx.Conn, queue string, con *Consumed, loss lossModel, f *Findings) (*consumeIndex, error) {
	if con == nil {
		return nil, nil
	}
	ix := indexConsumed(con)
	ix.loss = loss
	var err error
	if ix.cursors, err = readCursors(ctx, conn, queue); err != nil {
		return nil, err
	}
	f.Consume = &ConsumeFindings{Groups: make([]GroupFigures, len(con.Groups))}
	for i, g := range con.Groups {
		f.Consume.Groups[i].Group = g
		for _, l := range con.Leases {
			if l.Group == g {
				f.Consume.Groups[i].Leases++
			}
		}
	}
	return ix, nil
}
