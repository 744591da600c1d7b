package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/batch"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/output"
)

const pushUsage = `Usage:
  queenctl push QUEUE [PARTITION] [MESSAGE ...] [--txn-id ID] [--batch N] [--header 'NAME: VALUE' ...]
                                                  messages from the arguments
  queenctl push QUEUE [PARTITION] [--envelope] [--batch N] < lines.jsonl
                                                  JSON lines on stdin
  queenctl push QUEUE PARTITION --file PATH [--txn-id ID] [--header 'NAME: VALUE' ...]
                                                  one message of any bytes

Pushes messages over NATS request-reply to <prefix>.push.QUEUE.PARTITION
(PARTITION defaults to Default; name it to give message arguments, e.g.
'push orders Default '{"id":1}''). Needs --nats: the gateway takes pushes
over NATS only.

Each MESSAGE argument is the message's data as JSON; an argument that is
not valid JSON is sent as a JSON string. --txn-id sets the transactionId of
a single message argument; otherwise the gateway mints one (such a message
is never a duplicate). Put -- before messages that start with a dash.

With no MESSAGE arguments, stdin is read: one message per line, blank lines
skipped. By default each line is the message's data as JSON. With
--envelope each line is a whole message object as in a push body:
{"transactionId": "order-9137-paid", "data": {...}}. Every line is checked
before anything is sent.

--header 'NAME: VALUE' (repeatable; a name given again adds a value) gives
every message of the arguments, of the data lines or of --file those
headers; an --envelope line carries its own "headers". --file sends the
file's bytes, whatever they are, as one message of binary data (base64 on
the wire, dataEncoding "base64").

Messages go in requests of at most --batch. Each answer is printed: index
(position in the input), transactionId, status (queued, duplicate, failed),
messageId, offset and, for a failed message, the error. With -o json,
each request's answer array is printed as the gateway sent it. Exit code 1 if any message answered failed.

`

func setupPush(fs *flag.FlagSet) runFunc {
	txnID := fs.String("txn-id", "", "transactionId of the one message `argument`")
	envelope := fs.Bool("envelope", false, `each stdin line is a whole message object {"transactionId"?, "data"}`)
	batchMax := fs.Int("batch", 1000, "most messages per request (at most the gateway's QUEEN_MAX_BATCH)")
	file := fs.String("file", "", "push the `file`'s bytes as one message of binary data")
	var headers queengate.Headers
	fs.Func("header", "a header `'NAME: VALUE'` of every message (repeatable)", func(v string) error {
		name, value, ok := strings.Cut(v, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("%q: give NAME: VALUE", v)
		}
		if headers == nil {
			headers = queengate.Headers{}
		}
		name = strings.TrimSpace(name)
		headers[name] = append(headers[name], strings.TrimSpace(value))
		return nil
	})
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) == 0 {
			return cli.Usagef("push: which queue? e.g. queenctl push payments p1 '{\"amount\":5}'")
		}
		queue, partition, msgArgs := args[0], "Default", []string(nil)
		if len(args) > 1 {
			partition, msgArgs = args[1], args[2:]
		}
		if err := checkName("queue", queue); err != nil {
			return err
		}
		if err := checkName("partition", partition); err != nil {
			return err
		}
		switch {
		case *batchMax < 1:
			return cli.Usagef("push: --batch %d: must be at least 1", *batchMax)
		case *txnID != "" && len(msgArgs) != 1 && *file == "":
			return cli.Usagef("push: --txn-id is the transactionId of one message argument; give exactly one MESSAGE")
		case len(*txnID) > queengate.MaxTxnIDBytes:
			return cli.Usagef("push: --txn-id is %d bytes; a transactionId is 1-%d bytes", len(*txnID), queengate.MaxTxnIDBytes)
		case *file != "" && (len(msgArgs) > 0 || *envelope):
			return cli.Usagef("push: --file is the one message: give no MESSAGE arguments nor --envelope with it")
		case *envelope && headers != nil:
			return cli.Usagef(`push: --header is for message arguments and data lines; an --envelope line carries its own "headers"`)
		case *envelope && len(msgArgs) > 0:
			return cli.Usagef("push: --envelope is for lines on stdin; message arguments are data (use --txn-id for the transactionId)")
		case s.g.natsURL == "":
			return cli.Usagef("push needs NATS (the gateway takes pushes over NATS only): set --nats or QUEENCTL_NATS_URL, e.g. --nats nats://127.0.0.1:4222")
		}
		var msgs [][]byte
		var err error
		switch {
		case *file != "":
			data, err := os.ReadFile(*file)
			if err != nil {
				return cli.Usagef("push: --file: %v", err)
			}
			msgs = [][]byte{batch.FromBytes(data, *txnID, headers)}
		case len(msgArgs) > 0:
			msgs = batch.FromArgs(msgArgs, *txnID, headers)
		default:
			if msgs, err = batch.FromLines(s.stdin, *envelope, headers); err != nil {
				return cli.Usagef("push: %v", err)
			}
		}
		if len(msgs) == 0 {
			return cli.Usagef("push: no messages: give MESSAGE arguments or JSON lines on stdin")
		}
		nc, err := s.nats(ctx)
		if err != nil {
			return err
		}
		batches, err := batch.Plan(msgs, *batchMax, nc.MaxPayload())
		if err != nil {
			return cli.Usagef("push: %v", err)
		}
		return sendBatches(ctx, s, nc, nc.Subjects.Push(queue, partition), batches)
	}
}

// sendBatches pushes the batches in order and prints the answers. A batch
// rejected as a whole stops the run: the batches before it are stored
// (their answers are printed), nothing of it or after it is.
func sendBatches(ctx context.Context, s *session, nc *admin.NATSClient, subject string, batches [][][]byte) error {
	counts := map[string]int{}
	total, start, conflicts := 0, 0, 0
	tw := output.NewTable(s.stdout)
	for _, b := range batches {
		body := append(append([]byte("["), bytes.Join(b, []byte(","))...), ']')
		raw, err := nc.Request(ctx, subject, body)
		var ge *admin.GatewayError
		if errors.As(err, &ge) && ge.Code == queengate.CodeTooLarge {
			ge.Hint = "lower --batch to at most the gateway's QUEEN_MAX_BATCH"
		}
		if err != nil {
			tw.Flush() // the answers so far
			if start == 0 {
				return fmt.Errorf("push: %w", err)
			}
			which := fmt.Sprintf("messages %d-%d", start, start+len(b)-1)
			if len(b) == 1 {
				which = fmt.Sprintf("message %d", start)
			}
			return fmt.Errorf("push: %s: %w (the %d before were answered above)", which, err, start)
		}
		var answers []queengate.Result
		if err := output.DecodeAnswer(raw, &answers); err != nil {
			tw.Flush()
			return err
		}
		if s.g.output == "json" {
			if err := output.PrintJSON(s.stdout, raw); err != nil {
				return err
			}
		}
		if s.g.output == "table" && start == 0 {
			fmt.Fprintln(tw, "INDEX\tTRANSACTION ID\tSTATUS\tMESSAGE ID\tOFFSET\tERROR")
		}
		for _, a := range answers {
			counts[string(a.Status)]++
			total++
			if a.Status == queengate.StatusFailed && a.Conflict {
				conflicts++
			}
			if s.g.output != "table" {
				continue
			}
			if a.Status == queengate.StatusFailed {
				output.Row(tw, start+a.Index, a.TransactionID, a.Status, "-", "-", a.Error)
			} else {
				output.Row(tw, start+a.Index, a.TransactionID, a.Status, a.MessageID, a.Offset, "-")
			}
		}
		start += len(b)
	}
	// One flush at the end keeps the columns aligned across batches; the
	// input is in memory already (it is checked before sending).
	tw.Flush()
	if s.g.output == "table" {
		fmt.Fprintf(s.stdout, "%d queued, %d duplicate, %d failed\n", counts["queued"], counts["duplicate"], counts["failed"])
	}
	if counts["failed"] > 0 {
		return &failedError{failed: counts["failed"], conflicts: conflicts, total: total}
	}
	return nil
}
