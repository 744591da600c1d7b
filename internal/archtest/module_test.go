package archtest

import (
	"strings"
	"testing"
)

// heavyModules are what go-task's remote Taskfiles bring in (go-git from
// v3.40, go-getter with the AWS and Google Cloud SDKs from v3.46): hundreds
// of modules and minutes of compiling on a fresh machine's first
// `go tool task test`, for a feature the Taskfile does not use.
var heavyModules = []string{
	"github.com/hashicorp/go-getter",
	"github.com/aws/",
	"cloud.google.com/go",
	"google.golang.org/api",
	"github.com/go-git/",
}

// TestModuleStaysLean keeps the task runner pinned to a release without
// remote Taskfiles (see Taskfile.yml).
func TestModuleStaysLean(t *testing.T) {
	t.Parallel()
	for _, mod := range goList(t, "-m", "-f", "{{.Path}}", "all") {
		for _, heavy := range heavyModules {
			if strings.HasPrefix(mod, heavy) {
				t.Errorf("the module graph has %s: a task runner with remote Taskfiles, or a dependency that pulls cloud SDKs, crept in", mod)
			}
		}
	}
}
