package admin

import (
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/queengate/queengate"
)

// Operation is one admin request of docs/admin-api.md, in both of its
// spellings: the gateway serves the same body and answer on HTTP and NATS.
type Operation struct {
	Method, Path string                          // HTTP
	Subject      func(queengate.Subjects) string // NATS
	Body         []byte                          // JSON, or nil; over HTTP a GET sends none
}

// on is the operation of an HTTP route of subjects.go filled with
// values, and its NATS subject.
func on(route string, subject func(queengate.Subjects) string, body []byte, values ...string) Operation {
	method, path := queengate.Path(route, values...)
	return Operation{Method: method, Path: path, Subject: subject, Body: body}
}

func OpConfigure(req queengate.ConfigureRequest) Operation {
	body, _ := json.Marshal(req) // plain strings and integers: cannot fail
	return on(queengate.APIConfigure.Route(), queengate.Subjects.Configure, body)
}

// OpListQueues lists the queues from the one named from on ("": the
// first): a page of the list (docs/admin-api.md).
func OpListQueues(from string) Operation {
	query, body := page(from)
	op := on(queengate.APIQueuesList.Route(), queengate.Subjects.QueuesList, body)
	op.Path += query
	return op
}

// OpGetQueue gets a queue with its partitions from the one named from on
// ("": the first).
func OpGetQueue(queue, from string) Operation {
	query, body := page(from)
	op := on(queengate.APIQueuesGet.Route(), func(s queengate.Subjects) string { return s.QueuesGet(queue) }, body, queue)
	op.Path += query
	return op
}

// page is a paged list's position from as an HTTP query and a NATS body
// (none for the first page).
func page(from string) (query string, body []byte) {
	if from == "" {
		return "", nil
	}
	body, _ = json.Marshal(queengate.QueuesRequest{From: from}) // a string: cannot fail
	return "?" + url.Values{"from": {from}}.Encode(), body
}

// OpGroups lists a queue's consumer groups (group ""), or pages one group's
// partitions from the one named from on: the consumer-facing request, so
// that a consumer allowed only its own queue's subjects can run it.
func OpGroups(queue, group, from string) Operation {
	op := on(queengate.APIGroups.Route(), func(s queengate.Subjects) string { return s.Groups(queue) }, nil, queue)
	if group != "" {
		q := url.Values{"group": {group}}
		if from != "" {
			q.Set("from", from)
		}
		op.Path += "?" + q.Encode()
		op.Body, _ = json.Marshal(queengate.GroupsRequest{Group: group, From: from}) // strings: cannot fail
	}
	return op
}

func OpStatus() Operation {
	return on(queengate.APIStatus.Route(), queengate.Subjects.Status, nil)
}

// OpListTimers lists pending timers: queue "" for every queue, limit 0
// for the gateway's default, from the position from on (nil: the first
// due). Over HTTP the query carries what the NATS body does.
func OpListTimers(queue string, limit int, from *queengate.TimerPosition) Operation {
	q := url.Values{}
	req := map[string]any{}
	if queue != "" {
		q.Set("queue", queue)
		req["queue"] = queue
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
		req["limit"] = limit
	}
	if from != nil {
		q.Set("fromFireAt", from.FireAt.Format(time.RFC3339Nano))
		q.Set("fromTimerId", from.TimerID)
		req["from"] = from
	}
	body, _ := json.Marshal(req) // a string and an integer: cannot fail
	op := on(queengate.APITimerList.Route(), queengate.Subjects.TimerList, body)
	if len(q) > 0 {
		op.Path += "?" + q.Encode()
	}
	return op
}

// OpRead reads a partition from an offset.
func OpRead(queue, partition string, req queengate.ReadRequest) Operation {
	q := url.Values{"from": {strconv.FormatInt(req.From, 10)}}
	if req.Max > 0 {
		q.Set("max", strconv.Itoa(req.Max))
	}
	if req.MaxBytes > 0 {
		q.Set("maxBytes", strconv.FormatInt(req.MaxBytes, 10))
	}
	body, _ := json.Marshal(req) // integers: cannot fail
	op := on(queengate.APIRead.Route(), func(s queengate.Subjects) string { return s.Read(queue, partition) }, body, queue, partition)
	op.Path += "?" + q.Encode()
	return op
}

// OpGetMessage fetches one message by its id.
func OpGetMessage(id string) Operation {
	body, _ := json.Marshal(queengate.GetRequest{MessageID: id})
	return on(queengate.RouteMessage, queengate.Subjects.MessageGet, body, id)
}

// OpGetTransaction fetches the message a transactionId names.
func OpGetTransaction(queue, partition, txnID string) Operation {
	body, _ := json.Marshal(queengate.GetRequest{Queue: queue, Partition: partition, TransactionID: txnID})
	return on(queengate.RouteTransaction, queengate.Subjects.MessageGet, body, queue, partition, txnID)
}

// OpExplain explains a transactionId's verdict.
func OpExplain(queue, partition, txnID string) Operation {
	body, _ := json.Marshal(queengate.ExplainRequest{TransactionID: txnID})
	op := on(queengate.APIExplain.Route(), func(s queengate.Subjects) string { return s.Explain(queue, partition) }, body, queue, partition)
	op.Path += "?" + url.Values{"transactionId": {txnID}}.Encode()
	return op
}

func OpDeleteGroup(queue, group string) Operation {
	return on(queengate.APIGroupDelete.Route(), func(s queengate.Subjects) string { return s.GroupDelete(queue, group) }, nil, queue, group)
}

func OpDLQ(verb, queue string, req queengate.DeadLettersRequest) Operation {
	body, _ := json.Marshal(req) // strings and integers: cannot fail
	api, subject := queengate.APIDLQList, queengate.Subjects.DLQList
	if verb == "redrive" {
		api, subject = queengate.APIDLQRedrive, queengate.Subjects.DLQRedrive
	}
	return on(api.Route(), func(s queengate.Subjects) string { return subject(s, queue) }, body, queue)
}

func OpCreateGroup(queue, group string, req queengate.GroupCreateRequest) Operation {
	body, _ := json.Marshal(req) // strings, numbers and a time: cannot fail
	return on(queengate.APIGroupCreate.Route(), func(s queengate.Subjects) string { return s.GroupCreate(queue, group) }, body, queue, group)
}

func OpSeekGroup(queue, group string, req queengate.GroupSeekRequest) Operation {
	body, _ := json.Marshal(req) // strings, numbers and a time: cannot fail
	return on(queengate.APIGroupSeek.Route(), func(s queengate.Subjects) string { return s.GroupSeek(queue, group) }, body, queue, group)
}

func OpDeleteQueue(queue string) Operation {
	return on(queengate.APIQueueDelete.Route(), func(s queengate.Subjects) string { return s.QueueDelete(queue) }, nil, queue)
}

func OpPurgeQueue(queue, partition string) Operation {
	var body []byte
	if partition != "" {
		body, _ = json.Marshal(queengate.QueuePurgeRequest{Partition: partition}) // a string: cannot fail
	}
	return on(queengate.APIQueuePurge.Route(), func(s queengate.Subjects) string { return s.QueuePurge(queue) }, body, queue)
}
