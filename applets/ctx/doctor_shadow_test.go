package ctx

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Doctor reports a tool that shadows a builtin from another tier, and a
// projected tool whose server carries a builtin group's name; the
// builtins themselves are fine.
func TestDoctorReportsShadows(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	if code, out, errs := runIn(t, RunBootstrap, "--root", root); code != 0 {
		t.Fatalf("bootstrap: %d\n%s%s", code, out, errs)
	}
	if code, out, _ := runIn(t, RunDoctor, "--root", root, "-q"); code != 0 || strings.Contains(out, "shadow") {
		t.Fatalf("doctor on a fresh tree: %d\n%s", code, out)
	}
	user := filepath.Join(root, "home", strconv.Itoa(os.Geteuid()), "tool")
	writeFile(t, filepath.Join(user, "fs.read"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(root, "tool", "fs.grep"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(root, "tool", "fs.grep.d", "mcp"), `{"transport":"stdio","config":"/w/mcp.json","server":"fs","tool":"grep"}`+"\n", 0o644)
	code, out, _ := runIn(t, RunDoctor, "--root", root, "-q")
	for _, want := range []string{
		"unexpected home/" + strconv.Itoa(os.Geteuid()) + "/tool/fs.read: shadows the builtin tool fs.read (tool/fs.read)",
		"unexpected tool/fs.grep: projected from MCP server fs, the name of a builtin tool group",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("doctor exit %d, want 1", code)
	}
	if strings.Contains(out, "unexpected tool/fs.read:") {
		t.Errorf("the builtin itself reported:\n%s", out)
	}
}
