package ctx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Doctor reports a shared space whose directory is there but whose queue
// is not (a network filesystem that is not mounted), naming it as such
// and never advising ctx shared new; a complete local space is fine.
func TestDoctorReportsUnmountedSpace(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	if code, out, errs := runIn(t, RunBootstrap, "--root", root); code != 0 {
		t.Fatalf("bootstrap: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runIn(t, RunSharedNew, "--root", root, "proj"); code != 0 {
		t.Fatalf("shared new: %d\n%s%s", code, out, errs)
	}
	if code, out, _ := runIn(t, RunDoctor, "--root", root, "-q"); code != 0 || strings.Contains(out, "shared/") {
		t.Fatalf("doctor with a local space: %d\n%s", code, out)
	}
	if err := os.Mkdir(filepath.Join(root, "shared", "gone"), 0o2770); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runIn(t, RunDoctor, "--root", root, "-q")
	if code != 1 || !strings.Contains(out, "shared/gone/queue") || !strings.Contains(out, "not mounted") || strings.Contains(out, "shared new gone") {
		t.Fatalf("doctor with an unmounted space: exit %d\n%s", code, out)
	}
}
