package object

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"ctx/policy"
	"ctx/policy/schema"
)

// Control names a manifest may carry, per class. Everything else, and in
// particular the runtime-owned names (status, pid, log, name, sockets), is
// refused.
var (
	toolControls = []string{"description", "schema", "program", "cap", "policy", "mcp"}
	toolRequired = []string{"description", "schema", "cap", "policy"}

	agentControls = []string{"owner", "uid", "gid", "groups", "perm", "label", "iso", "parent", "life",
		"root", "cwd", "env", "path", "mount", "model", "window", "abi", "approval", "tools",
		"system.md", "prompt.template.md", "policy", "meta.json"}
	agentRequired = []string{"owner", "uid", "gid", "groups", "label", "iso", "parent", "life",
		"root", "cwd", "env", "path", "mount", "model", "abi", "policy"}
)

// AllowedControls returns the control names a manifest of class may carry
// and those it must carry.
func AllowedControls(class string) (allowed, required []string) {
	switch class {
	case "tool":
		return toolControls, toolRequired
	case "agent":
		return agentControls, agentRequired
	}
	return nil, nil
}

// ValidateControl checks one control value of an object of class against
// the control's grammar. It is the single place where install, check and
// (later) bootstrap and doctor validate control contents.
//
// Grammars owned by package policy (policy v0, label, mount, parent, env,
// path, perm, window, tools) are implemented here by the digest's rules
// until policy exports its parsers; each is marked "policy grammar".
func ValidateControl(class, name string, value []byte) error {
	if !utf8.Valid(value) {
		return fmt.Errorf("not valid UTF-8")
	}
	for i, r := range string(value) {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			return fmt.Errorf("control character %q at byte %d (only newline and tab are allowed)", r, i)
		}
	}
	s := string(value)
	switch class + "/" + name {
	case "tool/description", "agent/system.md", "agent/prompt.template.md":
		return nil
	case "tool/schema":
		return validSchemaObject(value)
	case "tool/program":
		return validSchemaObject(value)
	case "tool/cap":
		return nameLines(s, false)
	case "tool/policy", "agent/policy":
		return validPolicyV0(s)
	case "tool/mcp":
		_, err := ParseLocator(value)
		return err
	case "agent/owner", "agent/uid", "agent/gid":
		v, err := oneLine(s)
		if err == nil {
			err = canonicalUint32(v, true)
		}
		return err
	case "agent/groups":
		for i, l := range lines(s) {
			if err := canonicalUint32(l, true); err != nil {
				return fmt.Errorf("line %d: %v", i+1, err)
			}
		}
		return nil
	case "agent/perm":
		v, err := oneLine(s)
		if err == nil && !(len(v) == 3 && (v[0] == 'r' || v[0] == '-') && (v[1] == 'w' || v[1] == '-') && (v[2] == 'x' || v[2] == '-')) {
			err = fmt.Errorf("%q is not an rwx triplet such as r-x", v)
		}
		return err
	case "agent/label":
		v, err := oneLine(s)
		if err == nil {
			err = validLabel(v)
		}
		return err
	case "agent/iso":
		return oneOf(s, "shared", "uid", "userns")
	case "agent/life":
		return oneOf(s, "owned", "temp")
	case "agent/abi":
		return oneOf(s, "sdk-envelope-v1")
	case "agent/approval":
		return oneOf(s, "auto", "ask")
	case "agent/parent":
		return validParent(s)
	case "agent/root", "agent/cwd":
		v, err := oneLine(s)
		if err == nil && !filepath.IsAbs(v) {
			err = fmt.Errorf("%q is not an absolute path", v)
		}
		return err
	case "agent/env":
		return validEnv(s)
	case "agent/path":
		for i, l := range lines(s) {
			if !filepath.IsAbs(l) {
				return fmt.Errorf("line %d: %q is not an absolute directory", i+1, l)
			}
		}
		return nil
	case "agent/mount":
		return validMount(s)
	case "agent/model":
		v, err := oneLine(s)
		if err == nil {
			err = policy.ValidModelRef(v)
		}
		return err
	case "agent/window":
		v, err := oneLine(s)
		if err == nil && v != "auto" {
			err = canonicalUint32(v, false)
		}
		return err
	case "agent/tools":
		if s == "" {
			return nil
		}
		if err := nameLines(s, true); err != nil {
			return err
		}
		for _, l := range lines(s) {
			if l == "tsh" {
				return fmt.Errorf("tsh is reserved and cannot be declared")
			}
		}
		return nil
	case "agent/meta.json":
		var m map[string]any
		if len(strings.TrimSpace(s)) == 0 || s[strings.IndexFunc(s, notSpace)] != '{' || json.Unmarshal(value, &m) != nil {
			return fmt.Errorf("must be a JSON object")
		}
		return nil
	}
	return fmt.Errorf("unknown or runtime-owned control")
}

func notSpace(r rune) bool { return r != ' ' && r != '\t' && r != '\n' && r != '\r' }

// validSchemaObject requires a JSON object that compiles as a JSON Schema.
func validSchemaObject(value []byte) error {
	trimmed := strings.TrimLeft(string(value), " \t\n")
	if !strings.HasPrefix(trimmed, "{") {
		return fmt.Errorf("must be a JSON object")
	}
	if _, err := schema.Compile(value); err != nil {
		return err
	}
	return nil
}

// lines splits a control of one item per line; a final newline ends the
// last line rather than starting an empty one.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// oneLine returns the single value of a one-line control (a trailing
// newline is optional).
func oneLine(s string) (string, error) {
	v := strings.TrimSuffix(s, "\n")
	switch {
	case v == "":
		return "", fmt.Errorf("empty value")
	case strings.Contains(v, "\n"):
		return "", fmt.Errorf("must be one line")
	case strings.TrimSpace(v) != v:
		return "", fmt.Errorf("%q has surrounding whitespace", v)
	}
	return v, nil
}

func oneOf(s string, allowed ...string) error {
	v, err := oneLine(s)
	if err != nil {
		return err
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
}

// canonicalUint32 accepts base-10 digits without sign or leading zero;
// zero itself only when allowZero.
func canonicalUint32(v string, allowZero bool) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || strconv.FormatUint(n, 10) != v {
		return fmt.Errorf("%q is not a canonical unsigned 32-bit number", v)
	}
	if n == 0 && !allowZero {
		return fmt.Errorf("%q must be positive", v)
	}
	return nil
}

// nameLines requires one object name per line, no blank or padded lines,
// and (when noDup) no repeats.
func nameLines(s string, noDup bool) error {
	ls := lines(s)
	if len(ls) == 0 {
		return fmt.Errorf("empty value")
	}
	seen := map[string]bool{}
	for i, l := range ls {
		if err := policy.ValidName(l); err != nil {
			return fmt.Errorf("line %d: %v", i+1, err)
		}
		if noDup && seen[l] {
			return fmt.Errorf("line %d: %q repeated", i+1, l)
		}
		seen[l] = true
	}
	return nil
}

// policy grammar: label is a valid name (the subject itself) or an
// SELinux-style user:role:type:level whose type is the subject.
func validLabel(v string) error {
	if policy.ValidName(v) == nil {
		return nil
	}
	f := strings.Split(v, ":")
	if len(f) != 4 {
		return fmt.Errorf("label %q is neither a name nor user:role:type:level", v)
	}
	if err := policy.ValidName(f[2]); err != nil {
		return fmt.Errorf("label %q: type field: %v", v, err)
	}
	return nil
}

// policy grammar: policy v0, "allow SUBJECT CLASS:NAME PERM" per line,
// blank lines skipped, no comments.
var policyPerms = map[string][]string{
	"tool": {"execute"}, "model": {"use"}, "shared": {"read", "write"},
	"session": {"read", "write", "resume"}, "mount": {"read", "write"},
	"agent": {"create", "start", "stop", "read", "write"}, "network": {"connect"},
}

func validPolicyV0(s string) error {
	for i, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 4 || f[0] != "allow" {
			return fmt.Errorf("line %d: want \"allow SUBJECT CLASS:NAME PERMISSION\"", i+1)
		}
		if err := policy.ValidName(f[1]); err != nil {
			return fmt.Errorf("line %d: subject: %v", i+1, err)
		}
		class, obj, ok := strings.Cut(f[2], ":")
		perms, known := policyPerms[class]
		if !ok || !known {
			return fmt.Errorf("line %d: unknown object class in %q", i+1, f[2])
		}
		var err error
		switch class {
		case "model":
			err = policy.ValidModelRef(obj)
		case "network":
			if obj != "default" {
				err = fmt.Errorf("the only network object is \"default\"")
			}
		default:
			err = policy.ValidName(obj)
		}
		if err != nil {
			return fmt.Errorf("line %d: object: %v", i+1, err)
		}
		found := false
		for _, p := range perms {
			found = found || p == f[3]
		}
		if !found {
			return fmt.Errorf("line %d: permission %q is not valid for class %s", i+1, f[3], class)
		}
	}
	return nil
}

// policy grammar: parent is empty or "agent:NAME [session:S] [run:R]".
func validParent(s string) error {
	v := strings.TrimSuffix(s, "\n")
	if v == "" {
		return nil
	}
	if strings.Contains(v, "\n") {
		return fmt.Errorf("must be one line")
	}
	f := strings.Split(v, " ")
	want := []string{"agent", "session", "run"}
	j := 0
	for i, part := range f {
		k, name, ok := strings.Cut(part, ":")
		for j < len(want) && want[j] != k {
			j++
		}
		if !ok || j == len(want) || (i == 0 && k != "agent") {
			return fmt.Errorf("%q: want \"agent:NAME [session:S] [run:R]\"", v)
		}
		if err := policy.ValidName(name); err != nil {
			return fmt.Errorf("%s: %v", k, err)
		}
		j++
	}
	return nil
}

// policy grammar: env is KEY=VALUE per line, no expansion, CTX_* reserved.
func validEnv(s string) error {
	seen := map[string]bool{}
	for i, l := range lines(s) {
		k, _, ok := strings.Cut(l, "=")
		if !ok || !validEnvKey(k) {
			return fmt.Errorf("line %d: want KEY=VALUE with KEY of [A-Za-z_][A-Za-z0-9_]*", i+1)
		}
		if strings.HasPrefix(k, "CTX_") {
			return fmt.Errorf("line %d: %s: CTX_* variables are set by ctx only", i+1, k)
		}
		if seen[k] {
			return fmt.Errorf("line %d: %s repeated", i+1, k)
		}
		seen[k] = true
	}
	return nil
}

func validEnvKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// policy grammar: mount lines are SOURCE<TAB>TARGET<TAB>ro|rw<TAB>OPTIONS.
func validMount(s string) error {
	for i, l := range lines(s) {
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			return fmt.Errorf("line %d: want SOURCE<TAB>TARGET<TAB>MODE<TAB>OPTIONS", i+1)
		}
		if !filepath.IsAbs(f[0]) || !filepath.IsAbs(f[1]) {
			return fmt.Errorf("line %d: source and target must be absolute", i+1)
		}
		if f[2] != "ro" && f[2] != "rw" {
			return fmt.Errorf("line %d: mode %q is not ro or rw", i+1, f[2])
		}
		if f[3] == "-" {
			continue
		}
		seen := map[string]bool{}
		for _, o := range strings.Split(f[3], ",") {
			switch o {
			case "bind", "rbind", "nosuid", "nodev", "noexec":
			default:
				return fmt.Errorf("line %d: unknown option %q", i+1, o)
			}
			if seen[o] {
				return fmt.Errorf("line %d: option %q repeated", i+1, o)
			}
			seen[o] = true
		}
		if seen["bind"] && seen["rbind"] {
			return fmt.Errorf("line %d: bind and rbind exclude each other", i+1)
		}
	}
	return nil
}
