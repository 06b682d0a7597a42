package policy

import (
	"bytes"
	"strconv"
	"strings"
)

// BudgetsPath is where the run host shows a sandboxed run its budgets,
// read-only: one line per key of the budgets control,
//
//	KEY=VALUE mechanism=MECH[ used=N][ why=TEXT]
//
// VALUE a decimal or "unlimited". Readers take the leading KEY=VALUE of
// each line only; the rest describes the enforcement and may grow.
const BudgetsPath = "/mnt/proc/budgets"

// MaxBudgetsFile bounds how much of BudgetsPath a reader takes: the file
// is a dozen short lines.
const MaxBudgetsFile = 64 << 10

// ParseBudgetsFile parses the content of BudgetsPath. The result holds the
// keys the file gives, so Get falls back to a key's default for the others;
// keys this version does not know are skipped. A line whose first field is
// not KEY=VALUE, a value that is not a positive decimal (no suffix) or
// "unlimited", a key given twice or data past MaxBudgetsFile is an error:
// the file is the run host's, and a reader then takes the defaults.
func ParseBudgetsFile(data []byte) (Budgets, error) {
	if len(data) > MaxBudgetsFile {
		return nil, controlErr(BudgetsPath, 0, "", KindInvalidValue, "larger than %d bytes", MaxBudgetsFile)
	}
	b := Budgets{}
	seen := map[string]bool{}
	err := eachLine(data, func(num int, line []byte, _ bool) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		field, _, _ := bytes.Cut(line, []byte{' '})
		key, value, ok := strings.Cut(string(field), "=")
		if !ok || !budgetFileKey(key) {
			return controlErr(BudgetsPath, num, "", KindInvalidValue, "%s is not KEY=VALUE", quote(string(field)))
		}
		if seen[key] {
			return controlErr(BudgetsPath, num, "key", KindDuplicate, "key %s given twice", key)
		}
		seen[key] = true
		v, ok := parseBudgetFileValue(value)
		if !ok {
			return controlErr(BudgetsPath, num, "value", KindInvalidValue, "%s=%s: want a positive decimal or unlimited", key, quote(value))
		}
		if _, known := budgetKey(key); known {
			b[key] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// budgetFileKey reports whether s has the shape of a budgets key:
// lower-case letters, digits and underscores, starting with a letter.
func budgetFileKey(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// parseBudgetFileValue parses a value as FormatBudgetValue writes it.
func parseBudgetFileValue(s string) (uint64, bool) {
	if s == "unlimited" {
		return Unlimited, true
	}
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == Unlimited {
		return 0, false
	}
	return n, true
}

// ParseBudgetDetail reads the detail of a budget.exceeded event, which
// the run host writes as "KEY=VALUE: what happened": it returns the key, a
// key of the budgets control, and its value.
func ParseBudgetDetail(detail string) (key string, value uint64, ok bool) {
	head, _, _ := strings.Cut(detail, ":")
	key, v, found := strings.Cut(head, "=")
	if !found {
		return "", 0, false
	}
	if _, known := budgetKey(key); !known {
		return "", 0, false
	}
	value, ok = parseBudgetFileValue(v)
	if !ok {
		return "", 0, false
	}
	return key, value, true
}
