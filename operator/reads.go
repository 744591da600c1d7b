package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// LogReader is what reading needs from the store.
type LogReader interface {
	Read(ctx context.Context, r model.ReadQuery) (model.ReadResult, error)
	MessageAt(ctx context.Context, pid, offset int64) (m model.LogMessage, queue, partition string, err error)
	FindTxn(ctx context.Context, queue, partition, txnID string) (model.TxnLookup, error)
	// Originals is what a push's payload-conflict check compares; explain
	// compares the same.
	Originals(ctx context.Context, partitionID int64, offsets []int64) (map[int64]model.Hash, error)
}

// Read answers a read of queue/partition (the NATS face: a JSON body).
func (o *Ops) Read(ctx context.Context, queue, partition string, body []byte) (any, *queengate.Error) {
	req, werr := decodeRead(body)
	if werr != nil {
		return nil, werr
	}
	return o.read(ctx, queue, partition, req)
}

// ReadQuery answers a read given as URL parameters (the HTTP face).
func (o *Ops) ReadQuery(ctx context.Context, queue, partition string, q url.Values) (any, *queengate.Error) {
	var req queengate.ReadRequest
	for name, vals := range q {
		// The name is checked first, and echoes are clipped: an unknown
		// parameter's value is not quoted back whole.
		if werr := setReadField(&req, wire.Excerpt([]byte(name)), 0, "parameter"); werr != nil {
			return nil, werr
		}
		if len(vals) != 1 {
			return nil, wire.BadInput("%s is given %d times: give it once", wire.Excerpt([]byte(name)), len(vals))
		}
		n, err := strconv.ParseInt(vals[0], 10, 64)
		if err != nil {
			return nil, wire.BadInput("%s=%q: want a whole number", wire.Excerpt([]byte(name)), wire.Excerpt([]byte(vals[0])))
		}
		if werr := setReadField(&req, name, n, "parameter"); werr != nil {
			return nil, werr
		}
	}
	return o.read(ctx, queue, partition, req)
}

var readShape = wire.Shape{Name: "a read", Example: `{"from": 0, "max": 1000, "maxBytes": 524288}`}

// decodeRead reads a read body: empty, or whole numbers whose ranges
// read checks (the HTTP parameters' too).
func decodeRead(body []byte) (queengate.ReadRequest, *queengate.Error) {
	var req queengate.ReadRequest
	if wire.Blank(body) {
		return req, nil
	}
	var fields []wire.Field
	for _, name := range []string{"from", "max", "maxBytes"} {
		fields = append(fields, wire.Field{Name: name, Decode: func(raw []byte) *queengate.Error {
			n, werr := wire.WholeNumber(name, raw)
			if werr != nil {
				return werr
			}
			return setReadField(&req, name, n, "field")
		}})
	}
	return req, wire.DecodeObject(body, wire.TheBody, readShape, fields...)
}

// setReadField sets one of a read's numbers, given as a body field or a
// URL parameter (what).
func setReadField(req *queengate.ReadRequest, name string, n int64, what string) *queengate.Error {
	switch name {
	case "from":
		req.From = n
	case "max":
		req.Max = int(min(n, math.MaxInt32))
	case "maxBytes":
		req.MaxBytes = n
	default:
		return wire.BadInput("unknown %s %q: a read takes from, max and maxBytes", what, wire.Excerpt([]byte(name)))
	}
	return nil
}

func (o *Ops) read(ctx context.Context, queue, partition string, req queengate.ReadRequest) (any, *queengate.Error) {
	if werr := gateway.ValidPlace(queue, partition); werr != nil {
		return nil, werr
	}
	switch {
	case req.From < 0:
		return nil, wire.BadInput("from is %d: offsets start at 0", req.From)
	case req.Max < 0 || req.Max > queengate.MaxReadMax:
		return nil, wire.BadInput("max is %d: 1 to %d (0 or absent: %d)", req.Max, queengate.MaxReadMax, queengate.DefaultReadMax)
	case req.MaxBytes < 0 || req.MaxBytes > gateway.MaxPopBytes: // a pop's bound: one range for both
		return nil, wire.BadInput("maxBytes is %d: 1 to %d (0 or absent: %d)", req.MaxBytes, gateway.MaxPopBytes, queengate.DefaultReadMaxBytes)
	}
	if req.Max == 0 {
		req.Max = queengate.DefaultReadMax
	}
	budget := int64(o.AnswerBudget())
	if req.MaxBytes == 0 || req.MaxBytes > budget {
		req.MaxBytes = min(int64(queengate.DefaultReadMaxBytes), budget)
	}
	res, err := o.reads.Read(ctx, model.ReadQuery{Queue: queue, Partition: partition, From: req.From, Max: req.Max, MaxBytes: req.MaxBytes})
	if err != nil {
		return nil, readError(err)
	}
	ans, meta := readAnswer(queue, partition, req.From, res)
	// The bytes bound counts data only: trim until the answer fits in one
	// NATS message.
	raw := wire.EncodeRead(&ans, meta)
	for len(ans.Messages) > 1 && len(raw) > int(budget) {
		ans.Messages = ans.Messages[:len(ans.Messages)/2]
		ans.Next = ans.Messages[len(ans.Messages)-1].Offset + 1
		raw = wire.EncodeRead(&ans, meta)
	}
	if len(raw) > int(budget) {
		return nil, wire.TooLargeToAnswer(fmt.Sprintf("the message at offset %d", ans.Messages[0].Offset), len(raw), int(budget))
	}
	return raw, nil
}

// readAnswer is res as answered, with each message's meta as stored (the
// encoder splices it: not parsed into the answer's Headers and written
// again).
func readAnswer(queue, partition string, from int64, res model.ReadResult) (queengate.ReadAnswer, [][]byte) {
	ans := queengate.ReadAnswer{Queue: queue, Partition: partition, PartitionID: res.PartitionID,
		Messages: make([]queengate.StoredMessage, len(res.Messages)), Next: res.Next,
		FirstOffset: res.FirstOffset, LastOffset: res.LastOffset, Purged: from < res.FirstOffset}
	var meta [][]byte
	for i, m := range res.Messages {
		ans.Messages[i] = storedView(m)
		meta = model.WithMeta(meta, i, m.Meta)
	}
	return ans, meta
}

func storedView(m model.LogMessage) queengate.StoredMessage {
	return queengate.StoredMessage{Offset: m.Offset, MessageID: model.MessageID(m.PartitionID, m.Offset),
		TransactionID: m.TxnID, CreatedAt: m.CreatedAt, Data: json.RawMessage(m.Data)}
}

// readError maps a store failure of a read: not found is a 404.
func readError(err error) *queengate.Error {
	if errors.Is(err, model.ErrNotFound) {
		return gateway.NotFound(err, model.ErrNotFound, "")
	}
	return gateway.StoreError(err)
}

var getShape = wire.Shape{Name: "a message get", Example: `{"messageId": "..."} or {"queue": "...", "partition": "...", "transactionId": "..."}`}

// GetMessage answers a message by id, or by queue, partition and
// transactionId (the NATS face: a JSON body).
func (o *Ops) GetMessage(ctx context.Context, body []byte) (any, *queengate.Error) {
	req, werr := decodeGet(body)
	switch {
	case werr != nil:
		return nil, werr
	case req.MessageID != "":
		return o.MessageByID(ctx, req.MessageID)
	}
	return o.MessageByTxn(ctx, req.Queue, req.Partition, req.TransactionID)
}

// decodeGet reads a message get: a messageId, or a queue, partition and
// transactionId.
func decodeGet(body []byte) (queengate.GetRequest, *queengate.Error) {
	var req queengate.GetRequest
	werr := wire.DecodeObject(body, wire.TheBody, getShape,
		wire.Field{Name: "messageId", Decode: wire.StringInto("messageId", &req.MessageID)},
		wire.Field{Name: "queue", Decode: wire.StringInto("queue", &req.Queue)},
		wire.Field{Name: "partition", Decode: wire.StringInto("partition", &req.Partition)},
		wire.Field{Name: "transactionId", Decode: wire.StringInto("transactionId", &req.TransactionID)},
	)
	switch {
	case werr != nil:
		return req, werr
	case req.MessageID != "" && req.Queue+req.Partition+req.TransactionID == "":
		return req, nil
	case req.MessageID == "" && req.Queue != "" && req.Partition != "" && req.TransactionID != "":
		return req, nil
	}
	return req, wire.BadInput("name one message: %s", getShape.Example)
}

// MessageByID answers the message a messageId names.
func (o *Ops) MessageByID(ctx context.Context, id string) (any, *queengate.Error) {
	pid, offset, err := model.ParseMessageID(id)
	if err != nil {
		return nil, wire.BadInput("bad messageId %q: %v; give one as a push answers it", wire.Clip(id), err)
	}
	m, queue, partition, err := o.reads.MessageAt(ctx, pid, offset)
	if err != nil {
		return nil, readError(err)
	}
	raw := wire.EncodeMessage(&queengate.MessageAnswer{Queue: queue, Partition: partition, PartitionID: pid, StoredMessage: storedView(m)}, m.Meta)
	if budget := o.AnswerBudget(); len(raw) > budget {
		return nil, wire.TooLargeToAnswer("message "+id, len(raw), budget)
	}
	return raw, nil
}

// MessageByTxn answers the message a transactionId names in a partition:
// the copy a duplicate would name (within the window).
func (o *Ops) MessageByTxn(ctx context.Context, queue, partition, txnID string) (any, *queengate.Error) {
	if werr := gateway.ValidPlace(queue, partition); werr != nil {
		return nil, werr
	}
	if werr := checkTxnID(txnID); werr != nil {
		return nil, werr
	}
	l, err := o.reads.FindTxn(ctx, queue, partition, txnID)
	if err != nil {
		return nil, readError(err)
	}
	if !l.Found {
		return nil, &queengate.Error{Code: queengate.CodeNotFound, Text: fmt.Sprintf(
			"transactionId %q is not stored in %s/%s within the queue's window (%ds)", wire.Clip(txnID), queue, partition, l.WindowSeconds)}
	}
	if !l.Retained {
		return nil, &queengate.Error{Code: queengate.CodeNotFound, Text: fmt.Sprintf(
			"transactionId %q was stored at offset %d of %s/%s, and retention has deleted the message since (the id still counts for deduplication)", wire.Clip(txnID), l.Offset, queue, partition)}
	}
	return o.MessageByID(ctx, model.MessageID(l.PartitionID, l.Offset))
}

// checkTxnID checks a transactionId exactly as a push checks it (the
// push decoder, on the message {"transactionId": id}): a get by an id no
// push could carry is the push's 400, not a 404.
func checkTxnID(id string) *queengate.Error {
	if werr := checkTxnUTF8(id); werr != nil {
		return werr
	}
	body := append(wire.AppendJSONString([]byte(`{"transactionId":`), id), '}')
	_, werr := wire.DecodeOne(body, "a transactionId")
	return werr
}

// explainRequest is what explain asks about: a transactionId and,
// optionally, the data a push would carry (nil: not given).
type explainRequest struct {
	txnID string
	data  []byte
	meta  []byte // its data encoding counts: binary data is compared by its bytes
}

// Explain answers what a push of a transactionId (and data) to
// queue/partition would be answered now, and why (the NATS face: a JSON
// body, a push message).
func (o *Ops) Explain(ctx context.Context, queue, partition string, body []byte) (any, *queengate.Error) {
	req, werr := decodeExplain(body)
	if werr != nil {
		return nil, werr
	}
	return o.explain(ctx, queue, partition, req)
}

// ExplainQuery is Explain given as URL parameters (the HTTP face):
// transactionId and, optionally, data (raw JSON). They are checked as the
// push message {"transactionId": <id>, "data": <data>} would be.
func (o *Ops) ExplainQuery(ctx context.Context, queue, partition string, q url.Values) (any, *queengate.Error) {
	for name, vals := range q {
		switch {
		case name != "transactionId" && name != "data" && name != "dataEncoding":
			return nil, wire.BadInput("unknown parameter %q: explain takes transactionId=<id> and, optionally, data=<JSON> and dataEncoding=base64", wire.Excerpt([]byte(name)))
		case len(vals) != 1:
			return nil, wire.BadInput("%s is given %d times: give it once", wire.Excerpt([]byte(name)), len(vals))
		}
	}
	if !q.Has("transactionId") {
		return nil, wire.BadInput("transactionId is missing: explain takes transactionId=<id> and, optionally, data=<JSON>")
	}
	if werr := checkTxnUTF8(q.Get("transactionId")); werr != nil {
		return nil, werr
	}
	body := wire.AppendJSONString([]byte(`{"transactionId":`), q.Get("transactionId"))
	if q.Has("data") {
		if werr := checkDataParameter(q.Get("data")); werr != nil {
			return nil, werr
		}
		body = append(append(body, `,"data":`...), q.Get("data")...)
	}
	if q.Has("dataEncoding") {
		body = wire.AppendJSONString(append(body, `,"dataEncoding":`...), q.Get("dataEncoding"))
	}
	req, werr := decodeExplain(append(body, '}'))
	if werr != nil {
		// A byte position would be one of the body built here, which
		// the user never sent.
		werr.Text = atByte.ReplaceAllString(werr.Text, "")
		return nil, werr
	}
	return o.explain(ctx, queue, partition, req)
}

// checkTxnUTF8 refuses a transactionId taken from a URL that is not
// UTF-8: a push's body is UTF-8 JSON, so no push carries it (and
// encoding it for the push decoder would hide the bytes behind U+FFFD).
func checkTxnUTF8(id string) *queengate.Error {
	if !utf8.ValidString(id) {
		return wire.BadInput("transactionId %q is not valid UTF-8: no push can carry it (a push's body is UTF-8 JSON)", wire.Clip(id))
	}
	return nil
}

// atByte is where a decoder's message says the fault is.
var atByte = regexp.MustCompile(` at byte [0-9]+`)

// checkDataParameter checks that explain's data parameter is one JSON
// value, saying where it is not in the parameter's own bytes (and so that
// it cannot add fields to the message it is checked in).
func checkDataParameter(data string) *queengate.Error {
	err := wire.CheckValue([]byte(data))
	switch {
	case errors.Is(err, wire.ErrUnstorable):
		return wire.BadInput("the data parameter: %v", err)
	case err != nil:
		return wire.BadInput("the data parameter is malformed JSON: %v", err)
	}
	return nil
}

// decodeExplain reads an explain body with the push decoder, so the
// transactionId and data are checked exactly as a push checks them.
func decodeExplain(body []byte) (explainRequest, *queengate.Error) {
	m, werr := wire.DecodeOne(body, "an explain")
	switch {
	case werr != nil:
		return explainRequest{}, werr
	case !m.TxnIDSet:
		return explainRequest{}, wire.BadInput(`"transactionId" is missing: explain the verdict of which id?`)
	}
	data, meta, werr := m.Payload(0)
	if werr != nil {
		werr.Text = strings.Replace(werr.Text, "message 0: ", "", 1)
		return explainRequest{}, werr
	}
	return explainRequest{txnID: string(m.TxnID), data: data, meta: meta}, nil
}

// explain explains the verdict of a push of req to queue/partition.
func (o *Ops) explain(ctx context.Context, queue, partition string, req explainRequest) (any, *queengate.Error) {
	if werr := gateway.ValidPlace(queue, partition); werr != nil {
		return nil, werr
	}
	l, err := o.reads.FindTxn(ctx, queue, partition, req.txnID)
	if err != nil {
		return nil, readError(err)
	}
	ans := queengate.ExplainAnswer{Queue: queue, Partition: partition, TransactionID: req.txnID, Verdict: "new",
		Answer: "queued", WindowSeconds: l.WindowSeconds}
	if l.Found {
		window := time.Duration(l.WindowSeconds) * time.Second
		ans.Verdict, ans.Answer = "duplicate", "duplicate"
		ans.Original = &queengate.ExplainOriginal{Offset: l.Offset, MessageID: model.MessageID(l.PartitionID, l.Offset),
			CreatedAt: l.CreatedAt, CoveredUntil: l.CreatedAt.Add(window), Retained: l.Retained}
		if werr := o.explainConflict(ctx, queue, l, req, &ans); werr != nil {
			return nil, werr
		}
	}
	ans.Cache = o.explainCache(l, model.HashTxnID(req.txnID))
	ans.Explanation = explanation(ans, l.DBNow)
	return ans, nil
}

// explainConflict judges a duplicate's data as a push would (ingest's
// payload-conflict check): on a queue that compares payloads, data unlike
// the original's is flagged (flag) or fails (reject); an original whose
// data is gone cannot conflict; without data, the answer depends on it.
func (o *Ops) explainConflict(ctx context.Context, queue string, l model.TxnLookup, req explainRequest, ans *queengate.ExplainAnswer) *queengate.Error {
	q, err := o.store.QueueConfig(ctx, queue)
	if err != nil {
		return readError(err)
	}
	ans.OnConflict = string(q.OnConflict)
	if !q.OnConflict.Compares() {
		return nil
	}
	originals, err := o.reads.Originals(ctx, l.PartitionID, []int64{l.Offset})
	if err != nil {
		return gateway.StoreError(err)
	}
	original, ok := originals[l.Offset]
	switch {
	case !ok:
		ans.OriginalDataGone = true
	case req.data == nil && !model.IsBinary(req.meta):
		ans.Answer, ans.DependsOnData = "", true
	case model.HashData(req.data, req.meta) != original:
		ans.Conflict = true
		if q.OnConflict == model.ConflictReject {
			ans.Answer = "failed"
		}
	}
	return nil
}

// maxExplainOffsets bounds the offsets an explain lists of those the
// cache holds for one id (it counts them all): explain's answer fits by
// construction.
const maxExplainOffsets = 100

// explainCache is what this gateway's cache knows of the id, and the path
// a push of it would take.
func (o *Ops) explainCache(l model.TxnLookup, h model.Hash) queengate.ExplainCache {
	look := o.ing.CacheLookup(l.PartitionID, h)
	c := queengate.ExplainCache{State: look.State, Holds: len(look.Offsets) > 0 || look.Wide, Offsets: look.Offsets,
		OffsetCount: len(look.Offsets), VerifiedUpto: look.VerifiedUpto}
	if len(c.Offsets) > maxExplainOffsets {
		c.Offsets, c.OffsetsTruncated = c.Offsets[:maxExplainOffsets], true
	}
	switch {
	case l.WindowSeconds == 0:
		c.Path = "none"
	case look.State != "vouching" || look.Wide:
		c.Path = "full"
	case len(look.Offsets) > 0:
		c.Path = "narrowed"
	default:
		c.Path = "skip"
	}
	return c
}

func explanation(a queengate.ExplainAnswer, now time.Time) string {
	var verdict string
	switch {
	case a.WindowSeconds == 0:
		verdict = "The queue's window is 0: deduplication is off, and a push is stored whatever its transactionId."
	case a.Original == nil:
		verdict = fmt.Sprintf("Not stored in this partition within the last %ds: a push now is stored (queued).", a.WindowSeconds)
	default:
		o := a.Original
		verdict = fmt.Sprintf("Stored at offset %d (%s) at %s: %s, until %s (%s from now), when the %ds window stops covering it.",
			o.Offset, o.MessageID, o.CreatedAt.UTC().Format(time.RFC3339), duplicatePush(a), o.CoveredUntil.UTC().Format(time.RFC3339),
			o.CoveredUntil.Sub(now).Round(time.Second), a.WindowSeconds)
		if !o.Retained {
			verdict += " Retention has deleted the message itself; its transactionId still counts."
		}
		verdict += conflictSentence(a)
	}
	path := map[string]string{
		"none":     "",
		"skip":     " This gateway's cache vouches for the partition and does not hold the id: its push would skip the probe.",
		"narrowed": " This gateway's cache holds the id: its push would check only the offsets it holds.",
		"full":     fmt.Sprintf(" This gateway's cache cannot vouch for the partition (%s): its push would probe the whole window.", a.Cache.State),
	}[a.Cache.Path]
	return verdict + path
}

// conflictSentence says how a duplicate's data changes its answer on a
// queue that compares payloads.
// duplicatePush says what a push of a stored transactionId is answered
// while the window covers it.
func duplicatePush(a queengate.ExplainAnswer) string {
	rejects := a.OnConflict == string(model.ConflictReject) && !a.OriginalDataGone
	switch {
	case rejects && a.Conflict:
		return `a push of this data now fails with "conflict": true and writes nothing (it differs from the original's, and the queue rejects payload conflicts)`
	case rejects && a.DependsOnData:
		return "a push of the original's data now answers duplicate naming it"
	}
	return "a push now answers duplicate naming it"
}

func conflictSentence(a queengate.ExplainAnswer) string {
	fails := a.OnConflict == string(model.ConflictReject)
	switch {
	case a.OnConflict != string(model.ConflictFlag) && !fails:
		return ""
	case a.OriginalDataGone:
		return " The original's data is gone, so a payload conflict cannot be told: any data is answered duplicate."
	case a.DependsOnData && fails:
		return " The queue rejects payload conflicts: the same data is answered duplicate, other data fails with \"conflict\": true (give data to know which)."
	case a.DependsOnData:
		return " The queue flags payload conflicts: other data than the original's is answered duplicate with \"conflict\": true (give data to know which)."
	case a.Conflict && fails:
		return "" // duplicatePush said it
	case a.Conflict:
		return " This data differs from the original's: the duplicate answer carries \"conflict\": true."
	}
	return " This data is the original's, byte for byte: no conflict."
}
