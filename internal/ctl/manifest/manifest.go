package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/queueopt"
)

// manifestDoc is one YAML document. Values are kept as nodes so that each
// error can name its line; the decoder's KnownFields still rejects unknown
// keys, because the struct lists the known ones.
type manifestDoc struct {
	Queues []manifestQueue `yaml:"queues"`
}

// manifestQueue is one queue of a manifest. A field per option of
// queueopt.Known; options() pairs them.
type manifestQueue struct {
	Name               yaml.Node `yaml:"name"` // Kind 0: absent
	DedupWindowSeconds yaml.Node `yaml:"dedupWindowSeconds"`
	RetentionSeconds   yaml.Node `yaml:"retentionSeconds"`
	OnConflict         yaml.Node `yaml:"onConflict"`
	MaxAttempts        yaml.Node `yaml:"maxAttempts"`
	RetainUntil        yaml.Node `yaml:"retainUntil"`
	RetryDelayMs       yaml.Node `yaml:"retryDelayMs"`
	RetryBackoffMs     yaml.Node `yaml:"retryBackoffMs"`
	MaxAckPending      yaml.Node `yaml:"maxAckPending"`
	GroupIdleSeconds   yaml.Node `yaml:"groupIdleSeconds"`
	MaxUnheard         yaml.Node `yaml:"maxUnheardDeliveries"`
}

func (q *manifestQueue) options() map[string]*yaml.Node {
	return map[string]*yaml.Node{
		"dedupWindowSeconds":   &q.DedupWindowSeconds,
		"retentionSeconds":     &q.RetentionSeconds,
		"onConflict":           &q.OnConflict,
		"maxAttempts":          &q.MaxAttempts,
		"retainUntil":          &q.RetainUntil,
		"retryDelayMs":         &q.RetryDelayMs,
		"retryBackoffMs":       &q.RetryBackoffMs,
		"maxAckPending":        &q.MaxAckPending,
		"groupIdleSeconds":     &q.GroupIdleSeconds,
		"maxUnheardDeliveries": &q.MaxUnheard,
	}
}

// Queue is a validated queue of a manifest.
type Queue struct {
	Name string
	// Options holds only the options the manifest gives; "replace" resets
	// the others to their defaults.
	Options map[string]queueopt.Value
	Line    int
}

// Error lists everything wrong with a manifest, by line.
type Error struct {
	source string
	errs   []lineError
}

type lineError struct {
	line int // 0: unknown
	msg  string
}

func (e *Error) add(line int, format string, args ...any) {
	e.errs = append(e.errs, lineError{line, fmt.Sprintf(format, args...)})
}

func (e *Error) Error() string {
	sort.SliceStable(e.errs, func(i, j int) bool { return e.errs[i].line < e.errs[j].line })
	var b strings.Builder
	fmt.Fprintf(&b, "%s is not a valid manifest; nothing was sent. Fix:", e.source)
	for _, le := range e.errs {
		b.WriteString("\n  ")
		if le.line > 0 {
			fmt.Fprintf(&b, "line %d: ", le.line)
		}
		b.WriteString(le.msg)
	}
	return b.String()
}

// Parse decodes and validates a whole manifest. It returns every
// problem at once (as an *Error), so an operator fixes them in one go.
func Parse(source string, data []byte) ([]Queue, error) {
	me := &Error{source: source}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// A second pass over the same text, as plain nodes, gives each queue's
	// line even when it has no name.
	nodes := yaml.NewDecoder(bytes.NewReader(data))
	var specs []Queue
	firstLine := map[string]int{}
	for {
		var doc manifestDoc
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, s := range te.Errors {
				line, msg := explainTypeError(s)
				me.add(line, "%s", msg)
			}
		} else if err != nil {
			// A syntax error: the decoder cannot go on.
			line, msg := explainTypeError(strings.TrimPrefix(err.Error(), "yaml: "))
			me.add(line, "%s", msg)
			break
		}
		var root yaml.Node
		_ = nodes.Decode(&root)
		itemLines := queueLines(&root)
		for i := range doc.Queues {
			line := 0
			if i < len(itemLines) {
				line = itemLines[i]
			}
			if spec, ok := validateQueue(me, &doc.Queues[i], line); ok {
				if first, dup := firstLine[spec.Name]; dup {
					me.add(spec.Line, "queue %q is named twice (first at line %d); list each queue once", spec.Name, first)
					continue
				}
				firstLine[spec.Name] = spec.Line
				specs = append(specs, spec)
			}
		}
	}
	if len(me.errs) == 0 && len(specs) == 0 {
		me.add(0, "it names no queues; write e.g.\n    queues:\n      - name: payments\n        dedupWindowSeconds: 600")
	}
	if len(me.errs) > 0 {
		return nil, me
	}
	return specs, nil
}

// queueLines finds the line of each item of the document's queues list.
func queueLines(root *yaml.Node) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "queues" && m.Content[i+1].Kind == yaml.SequenceNode {
			var lines []int
			for _, item := range m.Content[i+1].Content {
				lines = append(lines, item.Line)
			}
			return lines
		}
	}
	return nil
}

// validateQueue checks one queue; ok is false when it has errors (added to
// me).
func validateQueue(me *Error, q *manifestQueue, line int) (spec Queue, ok bool) {
	n := len(me.errs)
	spec = Queue{Line: line, Options: map[string]queueopt.Value{}}
	switch {
	case q.Name.Kind == 0 || q.Name.Tag == "!!null":
		me.add(line, "a queue has no name; add name: <queue>")
		return spec, false
	case q.Name.Kind != yaml.ScalarNode:
		me.add(q.Name.Line, "name must be a plain string")
		return spec, false
	}
	spec.Name, spec.Line = q.Name.Value, q.Name.Line
	if !queengate.ValidName(spec.Name) {
		me.add(q.Name.Line, "bad queue name %q: use %s", spec.Name, queengate.NameRule)
	}
	for _, o := range queueopt.Known {
		node := q.options()[o.Name]
		if node.Kind == 0 {
			continue // absent
		}
		if v, msg := manifestValue(o, node); msg != "" {
			me.add(node.Line, "queue %q: %s %s", spec.Name, o.Name, msg)
		} else {
			spec.Options[o.Name] = v
		}
	}
	return spec, len(me.errs) == n
}

// manifestValue reads option o's value; msg says what is wrong.
func manifestValue(o queueopt.Option, n *yaml.Node) (queueopt.Value, string) {
	if o.List {
		return listValue(o, n)
	}
	if o.Words == nil {
		v, msg := secondsValue(n, o.Most())
		return queueopt.Seconds(v), inUnit(msg, o.Unit)
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" || !slices.Contains(o.Words, n.Value) {
		return queueopt.Value{}, fmt.Sprintf("is %s: one of %s", n.Value, strings.Join(o.Words, ", "))
	}
	return queueopt.Word(n.Value), ""
}

// listValue reads a list option: a YAML list of whole numbers of its
// unit, each at most o.Most(); msg says what is wrong.
func listValue(o queueopt.Option, n *yaml.Node) (queueopt.Value, string) {
	if n.Kind != yaml.SequenceNode {
		return queueopt.Value{}, fmt.Sprintf("must be a list of whole numbers of %s, e.g. [1000, 5000, 30000]; [] for none", o.Unit)
	}
	if len(n.Content) > queueopt.MaxRetryBackoff {
		return queueopt.Value{}, fmt.Sprintf("has %d entries: at most %d", len(n.Content), queueopt.MaxRetryBackoff)
	}
	v := queueopt.List()
	for i, e := range n.Content {
		ms, msg := secondsValue(e, o.Most())
		if msg != "" {
			return queueopt.Value{}, fmt.Sprintf("entry %d %s", i, inUnit(msg, o.Unit))
		}
		v.List = append(v.List, ms)
	}
	return v, ""
}

// inUnit says secondsValue's msg in unit instead of seconds.
func inUnit(msg, unit string) string {
	if unit == "milliseconds" {
		msg = strings.ReplaceAll(msg, "600 for 10 minutes", "600000 for 10 minutes")
	}
	return strings.ReplaceAll(msg, "seconds", unit)
}

// secondsValue reads an option as whole seconds, at most max; msg says
// what is wrong. The tag is checked because the YAML decoder would
// truncate 1.5 to 1.
func secondsValue(n *yaml.Node, max int64) (v int64, msg string) {
	if n.Kind != yaml.ScalarNode {
		return 0, "must be a whole number of seconds, not a list or mapping"
	}
	switch n.Tag {
	case "!!int":
	case "!!null":
		return 0, "has no value; give whole seconds, or remove the key for the default"
	case "!!float":
		if strings.Trim(n.Value, "0123456789") == "" {
			// An integer too large for int64 resolves as a float.
			return 0, fmt.Sprintf("is %s: at most %d", n.Value, max)
		}
		return 0, fmt.Sprintf("is %s: must be a whole number of seconds", n.Value)
	case "!!str":
		return 0, fmt.Sprintf("is %q: the manifest takes whole seconds as on the wire, e.g. 600 for 10 minutes", n.Value)
	default:
		return 0, fmt.Sprintf("is %s: must be a whole number of seconds", n.Value)
	}
	if err := n.Decode(&v); err != nil {
		return 0, fmt.Sprintf("is %s: too large, at most %d", n.Value, max)
	}
	switch {
	case v < 0:
		return 0, fmt.Sprintf("is %d: must be 0 or more", v)
	case v > max:
		return 0, fmt.Sprintf("is %d: at most %d", v, max)
	}
	return v, ""
}

var (
	reLine       = regexp.MustCompile(`^line (\d+): (.*)$`)
	reUnknownKey = regexp.MustCompile(`^field (.+) not found in type manifest\.(manifestDoc|manifestQueue)$`)
)

// explainTypeError turns one of the YAML decoder's messages ("line 4:
// field dedupWindow not found in type manifest.manifestQueue") into the line
// and what to fix.
func explainTypeError(s string) (line int, msg string) {
	msg = s
	if m := reLine.FindStringSubmatch(s); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if m := reUnknownKey.FindStringSubmatch(msg); m != nil {
		if m[2] == "manifestDoc" {
			return line, fmt.Sprintf("unknown key %q; a manifest has one key, queues (a list)", m[1])
		}
		var keys []string
		for _, o := range queueopt.Known {
			keys = append(keys, o.Name)
		}
		return line, fmt.Sprintf("unknown key %q in a queue; a queue takes name, %s", m[1], strings.Join(keys, ", "))
	}
	msg = strings.NewReplacer(
		"[]manifest.manifestQueue", "a list of queues (queues: then - name: …)",
		"manifest.manifestQueue", "a queue (a mapping: name: …)",
		"manifest.manifestDoc", "a manifest (a mapping with queues: …)",
	).Replace(msg)
	return line, msg
}
