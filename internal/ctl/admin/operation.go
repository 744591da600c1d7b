package admin

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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

func OpConfigure(req queengate.ConfigureRequest) Operation {
	body, _ := json.Marshal(req) // plain strings and integers: cannot fail
	return Operation{Method: http.MethodPost, Path: "/configure", Subject: queengate.Subjects.Configure, Body: body}
}

// OpListQueues lists the queues from the one named from on ("": the
// first): a page of the list (docs/admin-api.md).
func OpListQueues(from string) Operation {
	path, body := page(from)
	return Operation{Method: http.MethodGet, Path: "/queues" + path, Subject: queengate.Subjects.QueuesList, Body: body}
}

// OpGetQueue gets a queue with its partitions from the one named from on
// ("": the first).
func OpGetQueue(queue, from string) Operation {
	path, body := page(from)
	return Operation{Method: http.MethodGet, Path: "/queues/" + url.PathEscape(queue) + path,
		Subject: func(s queengate.Subjects) string { return s.QueuesGet(queue) }, Body: body}
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
	path := "/queues/" + url.PathEscape(queue) + "/groups"
	var body []byte
	if group != "" {
		q := url.Values{"group": {group}}
		if from != "" {
			q.Set("from", from)
		}
		path += "?" + q.Encode()
		body, _ = json.Marshal(queengate.GroupsRequest{Group: group, From: from}) // strings: cannot fail
	}
	return Operation{Method: http.MethodGet, Path: path,
		Subject: func(s queengate.Subjects) string { return s.Groups(queue) }, Body: body}
}

func OpStatus() Operation {
	return Operation{Method: http.MethodGet, Path: "/status", Subject: queengate.Subjects.Status}
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
	path := "/timers"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	body, _ := json.Marshal(req) // a string and an integer: cannot fail
	return Operation{Method: http.MethodGet, Path: path, Subject: queengate.Subjects.TimerList, Body: body}
}

func partitionPath(queue, partition string) string {
	return "/queues/" + url.PathEscape(queue) + "/partitions/" + url.PathEscape(partition)
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
	return Operation{Method: http.MethodGet, Path: partitionPath(queue, partition) + "/messages?" + q.Encode(),
		Subject: func(s queengate.Subjects) string { return s.Read(queue, partition) }, Body: body}
}

// OpGetMessage fetches one message by its id.
func OpGetMessage(id string) Operation {
	body, _ := json.Marshal(queengate.GetRequest{MessageID: id})
	return Operation{Method: http.MethodGet, Path: "/messages/" + url.PathEscape(id), Subject: queengate.Subjects.MessageGet, Body: body}
}

// OpGetTransaction fetches the message a transactionId names.
func OpGetTransaction(queue, partition, txnID string) Operation {
	body, _ := json.Marshal(queengate.GetRequest{Queue: queue, Partition: partition, TransactionID: txnID})
	return Operation{Method: http.MethodGet, Path: partitionPath(queue, partition) + "/transactions/" + pathSegment(txnID),
		Subject: queengate.Subjects.MessageGet, Body: body}
}

// pathSegment escapes s as one path segment. A segment of "." or ".."
// is escaped whole: as it is, the path would name another one (the
// gateway refuses such a path).
func pathSegment(s string) string {
	if s == "." || s == ".." {
		return strings.ReplaceAll(s, ".", "%2E")
	}
	return url.PathEscape(s)
}

// OpExplain explains a transactionId's verdict.
func OpExplain(queue, partition, txnID string) Operation {
	body, _ := json.Marshal(queengate.ExplainRequest{TransactionID: txnID})
	return Operation{Method: http.MethodGet, Path: partitionPath(queue, partition) + "/explain?" + url.Values{"transactionId": {txnID}}.Encode(),
		Subject: func(s queengate.Subjects) string { return s.Explain(queue, partition) }, Body: body}
}

func OpDeleteGroup(queue, group string) Operation {
	return Operation{Method: http.MethodDelete, Path: "/queues/" + url.PathEscape(queue) + "/groups/" + url.PathEscape(group),
		Subject: func(s queengate.Subjects) string { return s.GroupDelete(queue, group) }}
}

func OpDLQ(verb, queue string, req queengate.DeadLettersRequest) Operation {
	body, _ := json.Marshal(req) // strings and integers: cannot fail
	subject := queengate.Subjects.DLQList
	if verb == "redrive" {
		subject = queengate.Subjects.DLQRedrive
	}
	return Operation{Method: http.MethodPost, Path: "/queues/" + url.PathEscape(queue) + "/dlq/" + verb,
		Subject: func(s queengate.Subjects) string { return subject(s, queue) }, Body: body}
}

func OpCreateGroup(queue, group string, req queengate.GroupCreateRequest) Operation {
	body, _ := json.Marshal(req) // strings, numbers and a time: cannot fail
	return Operation{Method: http.MethodPut, Path: "/queues/" + url.PathEscape(queue) + "/groups/" + url.PathEscape(group), Body: body,
		Subject: func(s queengate.Subjects) string { return s.GroupCreate(queue, group) }}
}

func OpSeekGroup(queue, group string, req queengate.GroupSeekRequest) Operation {
	body, _ := json.Marshal(req) // strings, numbers and a time: cannot fail
	return Operation{Method: http.MethodPost, Path: "/queues/" + url.PathEscape(queue) + "/groups/" + url.PathEscape(group) + "/seek", Body: body,
		Subject: func(s queengate.Subjects) string { return s.GroupSeek(queue, group) }}
}

func OpDeleteQueue(queue string) Operation {
	return Operation{Method: http.MethodDelete, Path: "/queues/" + url.PathEscape(queue),
		Subject: func(s queengate.Subjects) string { return s.QueueDelete(queue) }}
}

func OpPurgeQueue(queue, partition string) Operation {
	var body []byte
	if partition != "" {
		body, _ = json.Marshal(queengate.QueuePurgeRequest{Partition: partition}) // a string: cannot fail
	}
	return Operation{Method: http.MethodPost, Path: "/queues/" + url.PathEscape(queue) + "/purge", Body: body,
		Subject: func(s queengate.Subjects) string { return s.QueuePurge(queue) }}
}
