package policy

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestParseBudgetsFile(t *testing.T) {
	live := "wall_s=86400 mechanism=host\n" +
		"pids=64 mechanism=cgroup1 used=12\n" +
		"tool_timeout_s=2 mechanism=tool\n" +
		"tool_output_bytes=1024 mechanism=tool\n" +
		"record_bytes=unlimited mechanism=host\n" +
		"children=8 mechanism=host used=0\n" +
		"future_key=5 mechanism=none why=a newer host\n"
	b, err := ParseBudgetsFile([]byte(live))
	if err != nil {
		t.Fatal(err)
	}
	want := Budgets{"wall_s": 86400, "pids": 64, "tool_timeout_s": 2, "tool_output_bytes": 1024,
		"record_bytes": Unlimited, "children": 8}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("got %v, want %v", b, want)
	}
	// Keys the file does not give take their defaults.
	if got := b.Get("memory_bytes"); got != 8<<30 {
		t.Fatalf("memory_bytes %d", got)
	}
	// The control's own rendering is a valid file too.
	if b, err := ParseBudgetsFile(FormatBudgets(DefaultBudgets())); err != nil || !reflect.DeepEqual(b, DefaultBudgets()) {
		t.Fatalf("defaults: %v %v", b, err)
	}
	if b, err := ParseBudgetsFile(nil); err != nil || len(b) != 0 {
		t.Fatalf("empty file: %v %v", b, err)
	}

	for _, tc := range []struct{ data, want string }{
		{"tool_timeout_s=0 mechanism=tool\n", "line 1: value: tool_timeout_s=\"0\""},
		{"tool_timeout_s=2K mechanism=tool\n", "line 1: value"},
		{"tool_timeout_s=-1\n", "line 1: value"},
		{"tool_timeout_s=02\n", "line 1: value"},
		{"tool_timeout_s=\n", "line 1: value"},
		{"tool_timeout_s=18446744073709551615\n", "line 1: value"},
		{"tool_timeout_s=99999999999999999999\n", "line 1: value"},
		{"wall_s=1\nwall_s=2\n", "line 2: key: key wall_s given twice"},
		{"wall_s=1\nshell_exec_timeout_s 20\n", "line 2: \"shell_exec_timeout_s\" is not KEY=VALUE"},
		{" wall_s=1\n", "line 1: \"\" is not KEY=VALUE"},
		{"Wall_s=1\n", "line 1: \"Wall_s=1\" is not KEY=VALUE"},
		{strings.Repeat("x", MaxBudgetsFile+1), "larger than 65536 bytes"},
	} {
		_, err := ParseBudgetsFile([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%.40q: error %v, want %q", tc.data, err, tc.want)
		}
	}
}

func TestParseBudgetDetail(t *testing.T) {
	for _, tc := range []struct {
		detail string
		key    string
		value  uint64
		ok     bool
	}{
		{"record_bytes=65536: terminal recording stopped; the run goes on", "record_bytes", 65536, true},
		{"wall_s=1: the run is ended", "wall_s", 1, true},
		{"pids=64", "pids", 64, true},
		{"nope=1: x", "", 0, false},
		{"pids=0: x", "", 0, false},
		{"pids=1K: x", "", 0, false},
		{"pids: x=1", "", 0, false},
		{"", "", 0, false},
		{"pids=\x1b[31m1: x", "", 0, false},
	} {
		k, v, ok := ParseBudgetDetail(tc.detail)
		if k != tc.key || v != tc.value || ok != tc.ok {
			t.Errorf("%q: %q %d %v", tc.detail, k, v, ok)
		}
	}
}

// FuzzParseBudgetsFile: errors are ControlErrors at a line of the input;
// what is accepted holds only known keys with positive values, and
// rendered back as the run host writes it, parses to the same.
func FuzzParseBudgetsFile(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBudgetsFile(data)
		if err != nil {
			checkControlError(t, BudgetsPath, data, err)
			return
		}
		var out bytes.Buffer
		for _, k := range BudgetKeys {
			v, ok := b[k.Name]
			if !ok {
				continue
			}
			if v == 0 {
				t.Fatalf("%s=0 accepted", k.Name)
			}
			fmt.Fprintf(&out, "%s=%s mechanism=none why=fuzz\n", k.Name, FormatBudgetValue(v))
		}
		if len(b) != bytes.Count(out.Bytes(), []byte{'\n'}) {
			t.Fatalf("unknown keys kept: %v", b)
		}
		b2, err := ParseBudgetsFile(out.Bytes())
		if err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("round trip of %q: %v %v", out.String(), b2, err)
		}
	})
}
