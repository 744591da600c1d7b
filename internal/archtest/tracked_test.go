package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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
