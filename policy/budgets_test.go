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
