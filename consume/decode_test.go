package consume

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bodyref"
)

// decodeCase is one body and what its decoder says (bodyref.DecodeCase).
type decodeCase struct{ Name, Body, Want string }

func FuzzDecodePop(f *testing.F) {
	bodyref.FuzzDecoder(f, bodyref.Pop, false, decodePop, func(req queengate.PopRequest, vals map[string]json.RawMessage) string {
		if n, ok := bodyref.Whole(vals["maxBytes"]); req.MaxBytes != n || !ok && req.MaxBytes != 0 {
			return fmt.Sprintf("maxBytes %d, the reference %s", req.MaxBytes, vals["maxBytes"])
		}
		if n, ok := bodyref.Whole(vals["maxAckPending"]); int64(req.MaxAckPending) != n || !ok && req.MaxAckPending != 0 {
			return fmt.Sprintf("maxAckPending %d, the reference %s", req.MaxAckPending, vals["maxAckPending"])
		}
		if _, ok := vals["ack"]; ok != (req.Ack != nil) {
			return fmt.Sprintf("ack %+v, the reference %s", req.Ack, vals["ack"])
		}
		return bodyref.SameString("group", req.Group, vals)
	})
}

func FuzzDecodeAck(f *testing.F) {
	bodyref.FuzzDecoder(f, bodyref.Ack, false, decodeAck, func(req queengate.AckRequest, vals map[string]json.RawMessage) string {
		var items []map[string]any
		_ = json.Unmarshal(vals["items"], &items)
		if len(items) != len(req.Items) {
			return fmt.Sprintf("%d items, the reference %d", len(req.Items), len(items))
		}
		for i, it := range items {
			delay, _ := it["delayMs"].(float64)
			if it["status"] != req.Items[i].Status || (it["offset"] != nil) != (req.Items[i].Offset != nil) ||
				int64(delay) != req.Items[i].DelayMs {
				return fmt.Sprintf("item %d: %+v, the reference %v", i, req.Items[i], it)
			}
		}
		return bodyref.SameString("leaseId", req.LeaseID, vals)
	})
}

func FuzzDecodeLease(f *testing.F) {
	for _, s := range bodyref.Seeds {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, renew bool) {
		ref := bodyref.Release
		if renew {
			ref = bodyref.Renew
		}
		decode := func(b []byte) (queengate.LeaseRequest, *queengate.Error) { return decodeLease(b, renew) }
		bodyref.CheckBody(t, body, ref, false, decode, func(req queengate.LeaseRequest, vals map[string]json.RawMessage) string {
			return bodyref.SameString("leaseId", req.LeaseID, vals)
		})
	})
}

func TestDecodeAckBody(t *testing.T) {
	t.Parallel()
	item := `{"transactionId":"t","status":"completed"}`
	ack := func(items string) string {
		return `{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[` + items + `]}`
	}
	itemFields := `(an ack item has "transactionId", "offset", "status", "error" and "delayMs")`
	bodyref.RunDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeAck(b); return werr }, []decodeCase{
		{"by id and by offset", ack(item + `,{"offset":7,"status":"failed","error":"boom"}`), ""},
		{"a failure with a delay", ack(`{"offset":7,"status":"failed","delayMs":5000}`), ""},
		{"a delay on a completed item", ack(`{"offset":7,"status":"completed","delayMs":5000}`),
			`item 0: "delayMs" is for a failed item: it says how long the message waits before it is delivered again`},
		{"a delay too long", ack(`{"offset":7,"status":"failed","delayMs":86400001}`), `item 0: "delayMs" is 86400001: from 0 to 86400000`},
		{"a negative delay", ack(`{"offset":7,"status":"failed","delayMs":-1}`), `item 0: "delayMs" is -1: from 0 to 86400000`},
		{"a delay as a string", ack(`{"offset":7,"status":"failed","delayMs":"5s"}`), `item 0: "delayMs" must be a whole number, not a string "5s"`},
		{"STATUS", ack(`{"transactionId":"t","STATUS":"completed"}`),
			`item 0: unknown field "STATUS": an ack item has only "transactionId", "offset", "status", "error" and "delayMs"; did you mean "status"?`},
		{"OFFSET", ack(`{"OFFSET":1,"status":"completed"}`),
			`item 0: unknown field "OFFSET": an ack item has only "transactionId", "offset", "status", "error" and "delayMs"; did you mean "offset"?`},
		{"transactionID", ack(item + `,{"transactionID":"t","status":"completed"}`),
			`item 1: unknown field "transactionID": an ack item has only "transactionId", "offset", "status", "error" and "delayMs"; did you mean "transactionId"?`},
		{"LeaseID", `{"group":"g","LeaseID":"` + bodyref.TestLease + `","items":[` + item + `]}`,
			`unknown field "LeaseID": an ack has only "group", "leaseId" and "items"; did you mean "leaseId"?`},
		{"a status given twice", ack(`{"offset":2,"status":"completed","status":"failed"}`),
			`item 0: field "status" is given twice: send it once ` + itemFields},
		{"a group given twice", `{"group":"g","group":"h","leaseId":"` + bodyref.TestLease + `","items":[` + item + `]}`,
			`field "group" is given twice: send it once (an ack has "group", "leaseId" and "items")`},
		{"an offset as a string", ack(`{"offset":"2","status":"completed"}`), `item 0: "offset" must be a whole number, not a string "2"`},
		{"an offset with a fraction", ack(`{"offset":2.5,"status":"completed"}`), `item 0: "offset" must be a whole number, not the JSON number 2.5`},
		{"a negative offset", ack(`{"offset":-1,"status":"completed"}`), `item 0: "offset" is -1: from 0 to 9223372036854775807`},
		{"items an object", `{"group":"g","leaseId":"` + bodyref.TestLease + `","items":{}}`,
			`"items" must be an array of items such as {"transactionId": "...", "status": "completed"} or {"offset": 7, "status": "failed", "error": "..."}, not an object`},
		{"an item not an object", ack(`7`), `item 0 must be a JSON object; want {"transactionId": "...", "status": "completed"} or {"offset": 7, "status": "failed", "error": "..."}`},
		{"status a number", ack(`{"transactionId":"t","status":1}`), `item 0: "status" must be a string, not the JSON number 1`},
		{"status missing", ack(`{"transactionId":"t"}`), `item 0: "status" is missing: "completed" or "failed"`},
		{"status unknown", ack(`{"transactionId":"t","status":"done"}`), `item 0: status "done": "completed" or "failed"`},
		{"both ids", ack(`{"transactionId":"t","offset":1,"status":"failed"}`), `item 0: give transactionId or offset, one of them`},
		{"an empty transactionId", ack(`{"transactionId":"","status":"failed"}`), `item 0: "transactionId" is empty: 1-256 bytes`},
		{"no items", ack(``), `"items" has 0 entries: 1 to 10000`},
		{"a malformed leaseId", `{"group":"g","leaseId":"x","items":[` + item + `]}`,
			`"leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not a string "x"`},
		{"a leaseId not a string", `{"group":"g","leaseId":7,"items":[` + item + `]}`,
			`"leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not the JSON number 7`},
		{"leaseId missing", `{"group":"g","items":[` + item + `]}`, `"leaseId" is missing: the lease the messages were popped under`},
		{"a bad group", `{"group":"a.b","leaseId":"` + bodyref.TestLease + `","items":[` + item + `]}`,
			`"group" must be a name, a string of 1-128 bytes of [A-Za-z0-9_-], not a string "a.b"`},
		{"not an object", `[]`, `the body must be a JSON object; want {"group": "...", "leaseId": "...", "items": [{"transactionId": "...", "status": "completed"}]}`},
		{"a NUL in an error", ack(`{"offset":1,"status":"failed","error":"\u0000"}`),
			`the body: \u0000 (NUL) cannot be stored: PostgreSQL refuses it in text and jsonb at byte 110; want {"group": "...", "leaseId": "...", "items": [{"transactionId": "...", "status": "completed"}]}`},
		{"a long unknown field is cut", `{"` + strings.Repeat("x", 100) + `":1}`,
			`unknown field "` + strings.Repeat("x", 40) + `… (100 bytes)": an ack has only "group", "leaseId" and "items"`},
	})
}

func TestDecodePopBody(t *testing.T) {
	t.Parallel()
	popAck := `{"partition":"p","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}]}`
	bodyref.RunDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodePop(b); return werr }, []decodeCase{
		{"everything", `{"group":"g","consumer":"c","max":5,"leaseMs":1000,"waitMs":0,"maxBytes":1024,"ack":{"partition":"p","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}]}}`, ""},
		{"maxBytes 0", `{"group":"g","maxBytes":0}`, `"maxBytes" is 0: from 1 to 1073741824`},
		{"maxBytes above 1 GiB", `{"group":"g","maxBytes":1073741825}`, `"maxBytes" is 1073741825: from 1 to 1073741824`},
		{"maxBytes a string", `{"group":"g","maxBytes":"1"}`, `"maxBytes" must be a whole number, not a string "1"`},
		{"Group", `{"Group":"g"}`, `unknown field "Group": a pop has only "group", "consumer", "max", "leaseMs", "waitMs", "maxBytes", "maxAckPending", "ack", "acks" and "partitions"; did you mean "group"?`},
		{"max twice", `{"group":"g","max":1,"max":2}`, `field "max" is given twice: send it once (a pop has "group", "consumer", "max", "leaseMs", "waitMs", "maxBytes", "maxAckPending", "ack", "acks" and "partitions")`},
		{"max with an exponent", `{"group":"g","max":1e2}`, `"max" must be a whole number, not the JSON number 1e2`},
		{"the ack's item misnamed", `{"group":"g","ack":{"partition":"p","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"Status":"completed"}]}}`,
			`"ack": item 0: unknown field "Status": an ack item has only "transactionId", "offset", "status", "error" and "delayMs"; did you mean "status"?`},
		{"the ack's lease malformed", `{"group":"g","ack":{"partition":"p","leaseId":"nope","items":[{"offset":0,"status":"completed"}]}}`,
			`"ack": "leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not a string "nope"`},
		{"the ack without partition", `{"group":"g","ack":{"leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}]}}`,
			`"ack": "partition" is missing: the partition of the batch it settles`},
		{"the ack without items", `{"group":"g","ack":{"partition":"p","leaseId":"` + bodyref.TestLease + `"}}`, `"ack": "items" has 0 entries: 1 to 10000`},
		{"the ack's status wrong", `{"group":"g","ack":{"partition":"p","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"ok"}]}}`,
			`"ack": item 0: status "ok": "completed" or "failed"`},
		{"the ack an array", `{"group":"g","ack":[]}`, `"ack" must be a JSON object; want {"partition": "...", "leaseId": "...", "items": [...]}`},
		{"consumer too long", `{"group":"g","consumer":"` + strings.Repeat("c", 129) + `"}`, `"consumer" must be a string of up to 128 bytes, not a string "` + strings.Repeat("c", 39) + `… (131 bytes)`},
		{"group missing", `{"max":1}`, `"group" is missing: want {"group": "...", "consumer": "...", "max": 100, "leaseMs": 30000, "waitMs": 5000, "maxBytes": 1048576, "ack": {...}, "partitions": 10}`},
		{"several partitions, several acks", `{"group":"g","partitions":10,"acks":[` + popAck + `,` + popAck + `]}`, ""},
		{"partitions 0", `{"group":"g","partitions":0}`, `"partitions" is 0: from 1 to 100`},
		{"partitions 101", `{"group":"g","partitions":101}`, `"partitions" is 101: from 1 to 100`},
		{"partitions a string", `{"group":"g","partitions":"5"}`, `"partitions" must be a whole number, not a string "5"`},
		{"acks empty", `{"group":"g","acks":[]}`, `"acks" must be an array of 1 to 100 acks such as {"partition": "...", "leaseId": "...", "items": [...]}, not an array`},
		{"acks an object", `{"group":"g","acks":` + popAck + `}`, `"acks" must be an array of 1 to 100 acks such as {"partition": "...", "leaseId": "...", "items": [...]}, not an object`},
		{"ack and acks", `{"group":"g","ack":` + popAck + `,"acks":[` + popAck + `]}`, `give "ack" (one batch's) or "acks" (several batches'), not both`},
		{"the second ack's status wrong", `{"group":"g","acks":[` + popAck + `,{"partition":"p","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"ok"}]}]}`,
			`"acks" 1: item 0: status "ok": "completed" or "failed"`},
		{"the second ack without partition", `{"group":"g","acks":[` + popAck + `,{"leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}]}]}`,
			`"acks" 1: "partition" is missing: the partition of the batch it settles`},
	})
}

func TestDecodeRenewAndReleaseBodies(t *testing.T) {
	t.Parallel()
	lease := func(renew bool) func([]byte) *queengate.Error {
		return func(b []byte) *queengate.Error { _, werr := decodeLease(b, renew); return werr }
	}
	bodyref.RunDecodeCases(t, lease(true), []decodeCase{
		{"a renewal", `{"group":"g","leaseId":"` + bodyref.TestLease + `","leaseMs":1000}`, ""},
		{"leaseMs missing", `{"group":"g","leaseId":"` + bodyref.TestLease + `"}`, `"leaseMs" is missing: a renewal runs 1 to 3600000 ms from now`},
		{"leaseMs a string", `{"group":"g","leaseId":"` + bodyref.TestLease + `","leaseMs":"1000"}`, `"leaseMs" must be a whole number, not a string "1000"`},
		{"leaseMs twice", `{"group":"g","leaseId":"` + bodyref.TestLease + `","leaseMs":1,"leaseMs":2}`,
			`field "leaseMs" is given twice: send it once (a renewal has "group", "leaseId" and "leaseMs")`},
		{"LeaseMS", `{"group":"g","leaseId":"` + bodyref.TestLease + `","LeaseMS":1}`,
			`unknown field "LeaseMS": a renewal has only "group", "leaseId" and "leaseMs"; did you mean "leaseMs"?`},
		{"a malformed leaseId", `{"group":"g","leaseId":"` + strings.ToUpper(bodyref.TestLease)[:35] + `","leaseMs":1}`,
			`"leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not a string "5F0C2A9E-3B1D-4C6E-9A8F-0123456789A"`},
	})
	bodyref.RunDecodeCases(t, lease(false), []decodeCase{
		{"a release", `{"group":"g","leaseId":"` + bodyref.TestLease + `"}`, ""},
		{"a release with leaseMs", `{"group":"g","leaseId":"` + bodyref.TestLease + `","leaseMs":0}`,
			`"leaseMs": a release takes none: it ends the lease now; a release has only "group" and "leaseId"`},
		{"group missing", `{"leaseId":"` + bodyref.TestLease + `"}`, `"group" is missing: want {"group": "...", "leaseId": "..."}`},
		{"leaseId missing", `{"group":"g"}`, `"leaseId" is missing: want {"group": "...", "leaseId": "..."}`},
		{"leaseId empty", `{"group":"g","leaseId":""}`, `"leaseId" is empty: give the UUID a pop answered`},
	})
}
