package policy

import (
	"strings"
	"testing"
)

func TestParseBudgets(t *testing.T) {
	b, err := ParseBudgets([]byte("pids=64\nmemory_bytes=512M\nwall_s=unlimited\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b.Get("pids") != 64 || b.Get("memory_bytes") != 512<<20 || b.Get("wall_s") != Unlimited || b.Get("open_files") != 8192 {
		t.Errorf("parsed %v", b)
	}
	for _, c := range []struct{ in, want string }{
		{"pids=0\n", "budgets: line 1: value"},
		{"pids=10K\n", "budgets: line 1: value"},
		{"pids=-1\n", "budgets: line 1: value"},
		{"pids=007\n", "budgets: line 1: value"},
		{"nope=1\n", "budgets: line 1: key"},
		{"pids=1\npids=2\n", "budgets: line 2: key"},
		{"pids\n", "budgets: line 1"},
		{"memory_bytes=99999999999999999999G\n", "too large"},
		{"memory_bytes=17179869184T\n", "too large"},
	} {
		_, err := ParseBudgets([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseBudgets(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
}

// TestParseDiskBytes: disk_bytes takes the size syntax of every byte
// budget (K M G T, unlimited) and refuses what they refuse.
func TestParseDiskBytes(t *testing.T) {
	if got := DefaultBudgets().Get("disk_bytes"); got != 8<<30 {
		t.Errorf("default disk_bytes %d", got)
	}
	for in, want := range map[string]uint64{"10M": 10 << 20, "4096": 4096, "2T": 2 << 40, "1K": 1024, "unlimited": Unlimited} {
		b, err := ParseBudgets([]byte("disk_bytes=" + in + "\n"))
		if err != nil || b.Get("disk_bytes") != want {
			t.Errorf("disk_bytes=%s: %d %v, want %d", in, b.Get("disk_bytes"), err, want)
		}
	}
	for _, in := range []string{"0", "10m", "10MB", "-1M", "010M", "M", "1.5G", "16777216T", " 10M"} {
		_, err := ParseBudgets([]byte("disk_bytes=" + in + "\n"))
		if err == nil || !strings.Contains(err.Error(), "budgets: line 1: value: disk_bytes=") {
			t.Errorf("disk_bytes=%s: %v, want a value error naming it", in, err)
		}
	}
	b, _ := ParseBudgetsFile([]byte("disk_bytes=10485760 mechanism=host+rlimit used=4096\n"))
	if b.Get("disk_bytes") != 10<<20 {
		t.Errorf("/mnt/proc/budgets line: %v", b)
	}
	parent, _ := ParseBudgets([]byte("disk_bytes=1G\n"))
	if got := DefaultBudgets().CapBy(parent).Get("disk_bytes"); got != 1<<30 {
		t.Errorf("a child's disk_bytes %d exceeds its parent's", got)
	}
}

func TestBudgetsCapBy(t *testing.T) {
	parent, _ := ParseBudgets([]byte("pids=100\nwall_s=60\n"))
	child, _ := ParseBudgets([]byte("pids=1000\nwall_s=unlimited\nopen_files=10\n"))
	got := child.CapBy(parent)
	if got.Get("pids") != 100 || got.Get("wall_s") != 60 || got.Get("open_files") != 10 {
		t.Errorf("capped %v", got)
	}
}

func TestFormatBudgetsRoundTrip(t *testing.T) {
	b, _ := ParseBudgets([]byte("tmp_bytes=2G\nchildren=unlimited\n"))
	b2, err := ParseBudgets(FormatBudgets(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range BudgetKeys {
		if b.Get(k.Name) != b2.Get(k.Name) {
			t.Errorf("%s: %d != %d", k.Name, b.Get(k.Name), b2.Get(k.Name))
		}
	}
}

// TestWithDiskRoom: the room left under disk_bytes caps file_bytes, never
// raises it, and leaves the caller's budgets as they were.
func TestWithDiskRoom(t *testing.T) {
	b, _ := ParseBudgets([]byte("file_bytes=1G\n"))
	if got := b.WithDiskRoom(10 << 20).Get("file_bytes"); got != 10<<20 {
		t.Errorf("capped %d", got)
	}
	if got := b.WithDiskRoom(4 << 30).Get("file_bytes"); got != 1<<30 {
		t.Errorf("raised to %d", got)
	}
	if got := b.WithDiskRoom(0).Get("file_bytes"); got != 1 {
		t.Errorf("no room: %d (a budget is never 0)", got)
	}
	if b.Get("file_bytes") != 1<<30 {
		t.Errorf("the original changed")
	}
}
