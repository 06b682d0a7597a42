package policy

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// The budgets control (agent/NAME.d/budgets) holds a run's limits, one
// KEY=VALUE a line. Every key is optional and takes its default when
// absent; a key given twice, an unknown key, a value that is not a positive
// decimal integer (bytes may carry a K, M, G or T suffix, powers of 1024)
// or the word unlimited is an error naming the line. The defaults suit a
// coding agent: make -j, go test and npm run under them.

// Unlimited is the value of a key set to "unlimited".
const Unlimited = math.MaxUint64

// BudgetKey describes one key of the budgets control.
type BudgetKey struct {
	Name    string
	Default uint64
	Bytes   bool   // a size: K, M, G, T suffixes accepted
	Doc     string // what it limits
}

// BudgetKeys are the keys of the budgets control, in canonical order.
var BudgetKeys = []BudgetKey{
	{"wall_s", 86400, false, "wall-clock seconds of the whole run"},
	{"cpu_s", 14400, false, "CPU seconds: of each process (RLIMIT_CPU), and of the whole run where a cgroup counts it"},
	{"memory_bytes", 8 << 30, true, "memory of the whole run (cgroup), else of each process's data (RLIMIT_DATA)"},
	{"pids", 4096, false, "processes and threads of the run"},
	{"file_bytes", 8 << 30, true, "largest file a process of the run may write (RLIMIT_FSIZE)"},
	{"open_files", 8192, false, "open descriptors of each process (RLIMIT_NOFILE)"},
	{"tmp_bytes", 1 << 30, true, "size of /tmp, a tmpfs"},
	{"disk_bytes", 8 << 30, true, "what the agent's home holds (data, cache, root, log; not its session records)"},
	{"tool_timeout_s", 20, false, "seconds one shell.exec command may run"},
	{"tool_output_bytes", 64 << 10, true, "output kept of one shell.exec command"},
	{"log_bytes", 16 << 20, true, "events and log lines the run host writes for the run"},
	{"record_bytes", 64 << 20, true, "terminal recording of the run"},
	{"children", 8, false, "live sub-agents (agent.start of children; not enforced until the agent tools exist)"},
	{"net_bytes", 16 << 30, true, "bytes the egress proxy relays for the run, both ways (named network grants)"},
	{"net_connections", 100000, false, "connections the egress proxy lets through for the run"},
}

// Budgets are a run's limits, keyed by BudgetKeys names.
type Budgets map[string]uint64

// DefaultBudgets returns every key at its default.
func DefaultBudgets() Budgets {
	b := Budgets{}
	for _, k := range BudgetKeys {
		b[k.Name] = k.Default
	}
	return b
}

// Get returns the value of key (its default when b lacks it).
func (b Budgets) Get(key string) uint64 {
	if v, ok := b[key]; ok {
		return v
	}
	for _, k := range BudgetKeys {
		if k.Name == key {
			return k.Default
		}
	}
	return Unlimited
}

// CapBy returns b with every key at most parent's: a child agent's
// budgets never exceed its parent's (attenuation).
func (b Budgets) CapBy(parent Budgets) Budgets {
	out := Budgets{}
	for _, k := range BudgetKeys {
		out[k.Name] = min(b.Get(k.Name), parent.Get(k.Name))
	}
	return out
}

func budgetKey(name string) (BudgetKey, bool) {
	for _, k := range BudgetKeys {
		if k.Name == name {
			return k, true
		}
	}
	return BudgetKey{}, false
}

// ParseBudgets parses the budgets control. Keys it does not set take
// their defaults.
func ParseBudgets(data []byte) (Budgets, error) {
	b := DefaultBudgets()
	seen := map[string]int{}
	err := eachLine(data, func(num int, line []byte, _ bool) error {
		key, value, ok := strings.Cut(string(line), "=")
		if !ok {
			return controlErr("budgets", num, "", KindInvalidValue, "%s is not KEY=VALUE", quote(string(line)))
		}
		k, known := budgetKey(key)
		if !known {
			return controlErr("budgets", num, "key", KindInvalidName, "unknown key %s (known: %s)", quote(key), budgetKeyList())
		}
		if first, dup := seen[key]; dup {
			return controlErr("budgets", num, "key", KindDuplicate, "key %s already set on line %d", key, first)
		}
		seen[key] = num
		v, reason := parseBudgetValue(value, k.Bytes)
		if reason != "" {
			return controlErr("budgets", num, "value", KindInvalidValue, "%s=%s: %s", key, quote(value), reason)
		}
		b[key] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func budgetKeyList() string {
	names := make([]string, len(BudgetKeys))
	for i, k := range BudgetKeys {
		names[i] = k.Name
	}
	return strings.Join(names, " ")
}

// parseBudgetValue parses a positive integer (with a binary size suffix
// when bytes) or "unlimited".
func parseBudgetValue(s string, bytes bool) (uint64, string) {
	if s == "unlimited" {
		return Unlimited, ""
	}
	mult := uint64(1)
	if bytes && s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	if s == "" || s[0] == '+' || s[0] == '-' || (len(s) > 1 && s[0] == '0') {
		return 0, "want a positive decimal integer" + suffixHint(bytes) + " or unlimited"
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return 0, "too large"
	}
	if err != nil || n == 0 {
		return 0, "want a positive decimal integer" + suffixHint(bytes) + " or unlimited"
	}
	if n > (Unlimited-1)/mult {
		return 0, "too large"
	}
	return n * mult, ""
}

func suffixHint(bytes bool) string {
	if bytes {
		return " (K, M, G or T for KiB, MiB, GiB, TiB)"
	}
	return ""
}

// FormatBudgets renders every key in canonical order, sizes in bytes.
func FormatBudgets(b Budgets) []byte {
	var out bytes.Buffer
	for _, k := range BudgetKeys {
		out.WriteString(k.Name + "=" + FormatBudgetValue(b.Get(k.Name)) + "\n")
	}
	return out.Bytes()
}

// FormatBudgetValue renders one value: a decimal, or unlimited.
func FormatBudgetValue(v uint64) string {
	if v == Unlimited {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

// WithDiskRoom returns b with file_bytes at most room, the space left
// under disk_bytes when the run starts: the kernel has no limit on what a
// directory holds, but RLIMIT_FSIZE stops one file from passing what is
// left of the home's budget the moment it would (EFBIG). The cap holds
// for every file the run writes, wherever it is.
func (b Budgets) WithDiskRoom(room uint64) Budgets {
	out := Budgets{}
	for k, v := range b {
		out[k] = v
	}
	if room < b.Get("file_bytes") {
		out["file_bytes"] = max(room, 1)
	}
	return out
}
