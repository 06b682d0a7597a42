package applets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops/broker"
)

// TestDecidedByHostIsTheEnvs: the authority check a warm worker's call
// skips is skipped for the Env the worker made (decidedByHost), and for no
// other: the same call in an Env made afresh, with an agent context that
// cannot be established, is refused by the tool's own check.
func TestDecidedByHostIsTheEnvs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// CTX_BROKERED: the init started this call, so nothing is brokered;
	// CTX_AGENT alone: a partial agent context, which the check refuses.
	vars := map[string]string{broker.BrokeredEnv: "t", "CTX_AGENT": "a", "CTX_ROOT": dir}
	for _, decided := range []bool{false, true} {
		e, out, errb := cli.BufferEnv("", vars)
		e.DecidedByHost = decided
		code := toolrun.RunTool(e, toolrun.FsStatTool, []string{file})
		switch {
		case decided && code != cli.OK:
			t.Errorf("decided by the host: exit %d, %s; want 0", code, errb)
		case !decided && (code != cli.Denied || !strings.Contains(errb.String(), "agent-context")):
			t.Errorf("not decided: exit %d, %q, %q; want %d and an agent-context refusal", code, out, errb, cli.Denied)
		}
	}
}
