package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/queengate/queengate"
)

// FromArgs turns arguments into messages with headers (nil: none):
// valid JSON is the data as is, byte for byte, anything else is sent as a
// JSON string (so `push q p hello` works).
func FromArgs(args []string, txnID string, headers queengate.Headers) [][]byte {
	var out [][]byte
	for _, a := range args {
		data := []byte(a)
		if !json.Valid(data) {
			data, _ = json.Marshal(a)
		}
		m, _ := queengate.Message{TransactionID: txnID, Data: data, Headers: headers}.AppendJSON(nil) // valid JSON: cannot fail
		out = append(out, m)
	}
	return out
}

// FromBytes is one message of binary data, sent as base64.
func FromBytes(data []byte, txnID string, headers queengate.Headers) []byte {
	m, _ := queengate.Message{TransactionID: txnID, Binary: data, Headers: headers}.AppendJSON(nil) // no JSON given: cannot fail
	return m
}

// FromLines reads JSON lines. All lines are checked before anything
// is sent, so a typo on line 5000 does not leave 4999 messages pushed.
func FromLines(r io.Reader, envelope bool, headers queengate.Headers) ([][]byte, error) {
	br := bufio.NewReader(r)
	var out [][]byte
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading stdin: %v", err)
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			m, msg := lineMessage(t, envelope, headers)
			if msg != "" {
				return nil, fmt.Errorf("stdin line %d: %s; nothing was sent", lineNo, msg)
			}
			out = append(out, m)
		}
		if err != nil {
			return out, nil
		}
	}
}

// lineMessage is one line as a message, or what is wrong with it.
func lineMessage(line []byte, envelope bool, headers queengate.Headers) ([]byte, string) {
	if !json.Valid(line) {
		return nil, "not valid JSON (each line is one JSON value)"
	}
	if !envelope {
		m, _ := queengate.Message{Data: line, Headers: headers}.AppendJSON(nil) // valid JSON: cannot fail
		return m, ""
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(line, &env) != nil {
		return nil, `with --envelope each line is a message object {"transactionId"?, "data"}`
	}
	if msg := envelopeKeys(line); msg != "" {
		return nil, msg
	}
	if raw, ok := env["transactionId"]; ok && string(raw) != "null" {
		var id string
		if json.Unmarshal(raw, &id) != nil || len(id) == 0 || len(id) > queengate.MaxTxnIDBytes {
			return nil, fmt.Sprintf("transactionId must be a string of 1-%d bytes", queengate.MaxTxnIDBytes)
		}
	}
	return line, "" // as written: its data byte for byte
}

// envelopeKeys says what is wrong with the keys of a message object (a
// valid JSON object), as the gateway would refuse them: a key other than
// transactionId and data (most likely a line of data given with
// --envelope), or a key given twice.
func envelopeKeys(obj []byte) string {
	dec := json.NewDecoder(bytes.NewReader(obj))
	_, _ = dec.Token() // {
	seen := map[string]bool{}
	for dec.More() {
		tok, _ := dec.Token() // a valid object: a key
		key, _ := tok.(string)
		switch {
		case key != "transactionId" && key != "data" && key != "headers" && key != "dataEncoding":
			return fmt.Sprintf(`unknown field %q: with --envelope each line is a message object {"transactionId"?, "data", "headers"?, "dataEncoding"?} (without --envelope each line is the data)`, key)
		case seen[key]:
			return fmt.Sprintf("field %q given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		_ = dec.Decode(&skip)
	}
	return ""
}

// Plan groups messages into request bodies of at most max
// messages and maxBytes bytes (the NATS max payload).
func Plan(msgs [][]byte, max, maxBytes int) ([][][]byte, error) {
	var (
		out  [][][]byte
		cur  [][]byte
		size = 2 // [ and ]
	)
	for i, m := range msgs {
		if len(m)+2 > maxBytes {
			return nil, fmt.Errorf("message %d is %d bytes, over the NATS max payload of %d bytes; nothing was sent", i, len(m), maxBytes)
		}
		if len(cur) == max || len(cur) > 0 && size+1+len(m) > maxBytes {
			out, cur, size = append(out, cur), nil, 2
		}
		if len(cur) > 0 {
			size++ // the comma
		}
		cur, size = append(cur, m), size+len(m)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, nil
}
