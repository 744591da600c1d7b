// Package pgwire is what pgstore and its consumer package share of
// talking to PostgreSQL: the arrays built directly in PostgreSQL's binary
// format and the codecs that send and read them (wire.go), the push's one
// statement, queen.log_push_bundle, its arguments encoded once and sent
// through pgconn, and its result rows (pushbundle.go), consumer_ack's
// arrays (ack.go), and the read of a conflict check's originals
// (originals.go).
package pgwire
