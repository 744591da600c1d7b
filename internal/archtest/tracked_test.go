package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxTrackedBytes bounds any tracked file: sources, docs, manifests and
// the odd screenshot fit; a build output or a data dump does not.
const maxTrackedBytes = 1 << 20

// executableMagic are the first bytes of compiled programs and objects.
var executableMagic = [][]byte{
	[]byte("\x7fELF"),        // Linux
	{0xcf, 0xfa, 0xed, 0xfe}, // Mach-O 64-bit
	{0xca, 0xfe, 0xba, 0xbe}, // Mach-O universal
	[]byte("MZ"),             // Windows PE
	[]byte("!<arch>\n"),      // static archive (.a)
	[]byte("go object "),     // Go object file
	{0x50, 0x4b, 0x03, 0x04}, // zip (jar, test bundles)
	{0x1f, 0x8b},             // gzip
}

// TestNoBuildOutputsTracked fails when git tracks a compiled binary or an
// oversized file: nothing generated or compiled belongs in the repository.
func TestNoBuildOutputsTracked(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (git ls-files: %v): nothing to check", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		path := filepath.Join(root, name)
		info, err := os.Lstat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		if info.Size() > maxTrackedBytes {
			t.Errorf("%s is tracked and %d bytes (over %d): build outputs and data stay out of git", name, info.Size(), maxTrackedBytes)
			continue
		}
		head := make([]byte, 16)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := f.Read(head)
		f.Close()
		for _, magic := range executableMagic {
			if bytes.HasPrefix(head[:n], magic) {
				t.Errorf("%s is tracked and is a compiled binary or archive: remove it (git rm --cached) and ignore it", name)
			}
		}
	}
}

// outside is the path of the reference texts the repository grew from,
// built here so that this file does not name it.
var outside = ".." + "/shared"

// mdReference is a Markdown file named in a source, doc or script.
var mdReference = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)

// TestNoReferenceLeavesTheRepository fails when a tracked file names a
// document the repository does not have (a path outside it, or a .md file
// it does not hold): a clone must stand on its own.
func TestNoReferenceLeavesTheRepository(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (git ls-files: %v): nothing to check", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	byBase := map[string]bool{}
	for _, f := range files {
		byBase[filepath.Base(f)] = true
	}
	for _, name := range files {
		switch filepath.Ext(name) {
		case ".go", ".md", ".sql", ".yml", ".yaml", ".sh", "":
		default:
			continue
		}
		body, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || bytes.IndexByte(body, 0) >= 0 {
			continue // gone from the work tree, or binary
		}
		text := string(body)
		if i := strings.Index(text, outside); i >= 0 {
			t.Errorf("%s points outside the repository: %q", name, line(text, i))
		}
		for _, ref := range mdReference.FindAllString(text, -1) {
			if strings.Contains(ref, "://") || byBase[filepath.Base(ref)] {
				continue
			}
			t.Errorf("%s names %s, which the repository does not have", name, ref)
		}
	}
}

// line is the line of text around byte i.
func line(text string, i int) string {
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		return text[start:]
	}
	return text[start : i+end]
}
