package operator_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// browser is a headless chromium driven over the DevTools protocol on
// its pipe (--remote-debugging-pipe: JSON messages, each ended by a NUL,
// written to its fd 3 and read from its fd 4), attached to one page.
// One request at a time: a test drives it step by step.
type browser struct {
	t       *testing.T
	toPage  *os.File
	answers *bufio.Reader
	lastID  int
	session string
}

// startBrowser starts chromium on a blank page, for the test's time;
// skipped where chromium is not installed.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed")
	}
	toChromium, ours, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	theirs, fromChromium, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toChromium, fromChromium} // its fds 3 and 4
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toChromium.Close()
	fromChromium.Close()
	t.Cleanup(func() {
		ours.Close() // chromium exits when its pipe closes
		if cmd.Wait() != nil {
			_ = cmd.Process.Kill()
		}
		theirs.Close()
	})
	b := &browser{t: t, toPage: ours, answers: bufio.NewReader(theirs)}
	var targets struct {
		TargetInfos []struct{ TargetID, Type string } `json:"targetInfos"`
	}
	b.call("Target.getTargets", nil, &targets)
	for _, ti := range targets.TargetInfos {
		if ti.Type == "page" {
			var attached struct{ SessionID string }
			b.call("Target.attachToTarget", map[string]any{"targetId": ti.TargetID, "flatten": true}, &attached)
			b.session = attached.SessionID
			return b
		}
	}
	t.Fatalf("chromium has no page: %+v", targets)
	return nil
}

// call sends a command (to the page once attached) and decodes its
// result into out; events on the way are passed over.
func (b *browser) call(method string, params any, out any) {
	b.t.Helper()
	b.lastID++
	msg := map[string]any{"id": b.lastID, "method": method, "params": params}
	if b.session != "" {
		msg["sessionId"] = b.session
	}
	req, _ := json.Marshal(msg)
	if _, err := b.toPage.Write(append(req, 0)); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	for {
		raw, err := b.answers.ReadBytes(0)
		if err != nil {
			b.t.Fatalf("%s: chromium's answer: %v", method, err)
		}
		var ans struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct{ Message string }
		}
		if err := json.Unmarshal(raw[:len(raw)-1], &ans); err != nil {
			b.t.Fatalf("%s: %q: %v", method, raw, err)
		}
		if ans.ID != b.lastID {
			continue // an event
		}
		if ans.Error != nil {
			b.t.Fatalf("%s: %s", method, ans.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(ans.Result, out); err != nil {
				b.t.Fatalf("%s: result %s: %v", method, ans.Result, err)
			}
		}
		return
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a
// promise) and decodes its value, JSON, into out.
func (b *browser) eval(expr string, out any) error {
	b.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if e := r.ExceptionDetails; e != nil {
		if e.Exception != nil {
			return fmt.Errorf("%s: %s", expr, e.Exception.Description)
		}
		return fmt.Errorf("%s: %s", expr, e.Text)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// navigate opens url in the page.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.call("Page.navigate", map[string]any{"url": url}, nil)
}
