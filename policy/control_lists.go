package policy

import (
	"bytes"
	"path"
	"strconv"
	"strings"
)

// The controls that hold lists or paths: env, path, tools, and the
// single-value controls window and model.

// EnvVar is one line of the env control.
type EnvVar struct {
	Key, Value string
}

// ValidEnvKey reports whether k matches [A-Za-z_][A-Za-z0-9_]*.
func ValidEnvKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c != '_' && !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ParseEnv parses the env control: one KEY=VALUE per line, split at the
// first "=". Values are data: no expansion, quoting or escapes, anything but
// NUL (the line ends at LF). Keys match [A-Za-z_][A-Za-z0-9_]*; a key given
// twice and every CTX_* key (the host sets those) are refused. Blank lines
// are refused.
func ParseEnv(data []byte) ([]EnvVar, error) {
	var vars []EnvVar
	seen := map[string]int{}
	err := eachLine(data, func(num int, line []byte, _ bool) error {
		key, value, ok := strings.Cut(string(line), "=")
		switch {
		case !ok:
			return controlErr("env", num, "", KindInvalidValue, "%s is not KEY=VALUE", quote(string(line)))
		case !ValidEnvKey(key):
			return controlErr("env", num, "key", KindInvalidName, "key %s does not match [A-Za-z_][A-Za-z0-9_]*", quote(key))
		case strings.HasPrefix(key, "CTX_"):
			return controlErr("env", num, "key", KindForbidden, "key %s: CTX_* variables are set by the host only", key)
		case strings.IndexByte(value, 0) >= 0:
			return controlErr("env", num, "value", KindInvalidValue, "value of %s contains NUL", key)
		}
		if first, dup := seen[key]; dup {
			return controlErr("env", num, "key", KindDuplicate, "key %s already set on line %d", key, first)
		}
		seen[key] = num
		vars = append(vars, EnvVar{key, value})
		return nil
	})
	return vars, err
}

// FormatEnv renders an env control.
func FormatEnv(vars []EnvVar) []byte {
	var b bytes.Buffer
	for _, v := range vars {
		b.WriteString(v.Key + "=" + v.Value + "\n")
	}
	return b.Bytes()
}

// CheckAbsPath checks that p is an absolute, canonical path (what
// path.Clean returns: no "." or ".." component, no doubled or trailing
// slash) without control bytes. It returns the reason when it is not.
func CheckAbsPath(p string) (string, bool) {
	switch {
	case p == "":
		return "empty path", false
	case p[0] != '/':
		return quote(p) + " is not absolute", false
	case HasControlByte(p):
		return quote(p) + " contains a control byte", false
	}
	for _, comp := range strings.Split(p[1:], "/") {
		if comp == "." || comp == ".." {
			return quote(p) + " has a " + comp + " component", false
		}
	}
	if path.Clean(p) != p {
		return quote(p) + " is not canonical (doubled or trailing /)", false
	}
	return "", true
}

// ParsePath parses the path control: one absolute canonical tool directory
// per line, no duplicates, no ":" (entries are joined with ":" into
// CTX_PATH). An empty file is an empty tool path: the agent finds no tools.
func ParsePath(data []byte) ([]string, error) {
	var dirs []string
	seen := map[string]int{}
	err := eachLine(data, func(num int, line []byte, _ bool) error {
		dir := string(line)
		if reason, ok := CheckAbsPath(dir); !ok {
			return controlErr("path", num, "directory", KindInvalidPath, "%s", reason)
		}
		if strings.IndexByte(dir, ':') >= 0 {
			return controlErr("path", num, "directory", KindInvalidPath, "%s contains \":\", the CTX_PATH separator", quote(dir))
		}
		if first, dup := seen[dir]; dup {
			return controlErr("path", num, "directory", KindDuplicate, "%s already on line %d", quote(dir), first)
		}
		seen[dir] = num
		dirs = append(dirs, dir)
		return nil
	})
	return dirs, err
}

// FormatLines renders a one-item-per-line control (path, tools).
func FormatLines(items []string) []byte {
	var b bytes.Buffer
	for _, it := range items {
		b.WriteString(it)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ParsePathControl parses a one-line control holding one absolute canonical
// path (root, cwd); control names the file for errors.
func ParsePathControl(control string, data []byte) (string, error) {
	s, err := singleLine(control, data)
	if err != nil {
		return "", err
	}
	if reason, ok := CheckAbsPath(s); !ok {
		return "", controlErr(control, 1, control, KindInvalidPath, "%s", reason)
	}
	return s, nil
}

// ParseTools parses the tools control, the static direct-native tool set:
// canonical tool names, one per line, each line ending in LF (the final one
// too), no blank lines, no CR, no padding, no duplicates, and never "tsh"
// (the shell is not a tool an agent declares). An empty file is an empty set.
func ParseTools(data []byte) ([]string, error) {
	var tools []string
	seen := map[string]int{}
	num := 0
	for len(data) > 0 {
		num++
		line, rest, terminated := bytes.Cut(data, []byte{'\n'})
		data = rest
		name := string(line)
		if !terminated {
			return nil, controlErr("tools", num, "", KindMissingNewline, "the last line must end in a newline")
		}
		if err := ValidName(name); err != nil {
			return nil, controlErr("tools", num, "tool", KindInvalidName, "tool %s: %s", quote(name), nameReason(err))
		}
		if name == "tsh" {
			return nil, controlErr("tools", num, "tool", KindForbidden, "tsh is reserved and cannot be declared")
		}
		if first, dup := seen[name]; dup {
			return nil, controlErr("tools", num, "tool", KindDuplicate, "%s already on line %d", name, first)
		}
		seen[name] = num
		tools = append(tools, name)
	}
	return tools, nil
}

// Window is the window control: Auto, or an explicit positive token count.
type Window struct {
	Auto   bool
	Tokens uint32
}

func (w Window) String() string {
	if w.Auto {
		return "auto"
	}
	return strconv.FormatUint(uint64(w.Tokens), 10)
}

// ParseWindow parses the window control: "auto" or a canonical positive
// decimal u32 (no sign, no leading zero, 1..4294967295). Whether a number
// fits the model's limit is checked where the model is known.
func ParseWindow(data []byte) (Window, error) {
	s, err := singleLine("window", data)
	if err != nil {
		return Window{}, err
	}
	if s == "auto" {
		return Window{Auto: true}, nil
	}
	ok := s != "" && s[0] >= '1' && s[0] <= '9'
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] >= '0' && s[i] <= '9'
	}
	n, perr := strconv.ParseUint(s, 10, 32)
	if !ok || perr != nil {
		return Window{}, controlErr("window", 1, "window", KindInvalidValue, "%s is not auto or a positive decimal number below 2^32", quote(s))
	}
	return Window{Tokens: uint32(n)}, nil
}

// ParseModel parses the model control: a model name provider/model or one
// of the aliases main and helper.
func ParseModel(data []byte) (string, error) {
	s, err := singleLine("model", data)
	if err != nil {
		return "", err
	}
	if err := ValidModelRef(s); err != nil {
		return "", controlErr("model", 1, "model", KindInvalidName, "model %s: %s", quote(s), nameReason(err))
	}
	return s, nil
}
