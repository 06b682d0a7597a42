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

// TestOnlyTheHostOrderDecides: the authority check a tool worker's call
// skips is skipped for a call run on the host's order (the order a tool
// worker got from the init), and for no other: the same call, claiming to
// be brokered (CTX_BROKERED) in an agent context that cannot be
// established, is refused by the tool's own check. A call on the host's
// order records nothing itself: what only the tool knows goes to the host
// (order.Report), not to the tool's log.
func TestOnlyTheHostOrderDecides(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "tool", "fs.stat.d", "log")
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	// CTX_AGENT alone: a partial agent context, which the check refuses.
	vars := map[string]string{broker.BrokeredEnv: "1", "CTX_AGENT": "a", "CTX_ROOT": dir}

	e, out, errb := cli.BufferEnv("", vars)
	if code := toolrun.RunTool(e, toolrun.FsStatTool, []string{file}); code != cli.Denied || !strings.Contains(errb.String(), "agent-context") {
		t.Errorf("claiming a brokered call: exit %d, %q, %q; want %d and an agent-context refusal", code, out, errb, cli.Denied)
	}

	var reports []broker.Report
	order := &toolrun.HostOrder{Report: func(r broker.Report) { reports = append(reports, r) }}
	e, _, errb = cli.BufferEnv("", vars)
	if code := executeOrder(e, []string{"fs.stat", file}, order); code != cli.OK {
		t.Errorf("on the host's order: exit %d, %s; want 0", code, errb)
	}
	e, _, _ = cli.BufferEnv("", vars)
	if code := executeOrder(e, []string{"fs.stat", filepath.Join(dir, "missing")}, order); code == cli.OK {
		t.Error("fs.stat of a missing file on the host's order: exit 0")
	}
	if len(reports) != 1 || reports[0].Errno != "ENOENT" {
		t.Errorf("reports to the host %+v, want one, ENOENT", reports)
	}
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Errorf("a call on the host's order logged itself: %v", err)
	}
	// A person's call, decided by no host, is logged beside the tool.
	e, _, errb = cli.BufferEnv("", map[string]string{"CTX_ROOT": dir})
	if code := toolrun.RunTool(e, toolrun.FsStatTool, []string{file}); code != cli.OK {
		t.Fatalf("a person's call: exit %d, %s", code, errb)
	}
	if _, err := os.Stat(log); err != nil {
		t.Errorf("a person's call left no log: %v", err)
	}
}

// TestHostOperationNeedsTheHostChannel: agent.update on an order without
// the call's host-operation channel (a forged order, or a direct
// execution) has no host to ask: refused (69), nothing asked.
func TestHostOperationNeedsTheHostChannel(t *testing.T) {
	e, _, errb := cli.BufferEnv(`{"control":"system.md","content":"forged"}`, nil)
	if code := executeOrder(e, []string{"agent.update"}, &toolrun.HostOrder{}); code != cli.Unavailable || !strings.Contains(errb.String(), "runs only through the run host") {
		t.Errorf("agent.update without its channel: exit %d, %q; want %d", code, errb, cli.Unavailable)
	}
}
