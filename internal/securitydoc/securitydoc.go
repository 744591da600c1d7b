// Package securitydoc gives tests the NATS authorization block that
// docs/security.md documents, so that what the document says is what the
// tests run.
package securitydoc

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var confFence = regexp.MustCompile("(?s)```conf\n(.*?)```")

// Block is the first ```conf block of docs/security.md under the
// repository root root.
func Block(tb testing.TB, root string) string {
	tb.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		tb.Fatal(err)
	}
	m := confFence.FindSubmatch(doc)
	if m == nil {
		tb.Fatal("docs/security.md has no ```conf block")
	}
	return string(m[1])
}

// File writes Block to a nats-server configuration file in a temporary
// directory of tb and returns its path.
func File(tb testing.TB, root string) string {
	tb.Helper()
	conf := filepath.Join(tb.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(Block(tb, root)), 0o600); err != nil {
		tb.Fatal(err)
	}
	return conf
}
