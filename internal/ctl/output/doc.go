// Package output is how queenctl prints: what came from the gateway or a
// user made printable (no terminal escapes, no broken tables), aligned
// tables, indented JSON answers, a status answer flattened to dotted keys,
// and the formats of times and byte counts. It reads answers generically
// and knows no command; it imports nothing of this module.
package output
