package object

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"ctx/policy"
	"ctx/policy/schema"
)

// Control names a manifest may carry, per class. Everything else, and in
// particular the runtime-owned names (status, pid, log, name, sockets), is
// refused.
var (
	toolControls = []string{"description", "schema", "program", "cap", "policy", "mcp", "annotations", "input", "output.schema"}
	toolRequired = []string{"description", "schema", "cap", "policy"}

	agentControls = []string{"owner", "uid", "gid", "groups", "perm", "label", "iso", "parent", "life",
		"root", "cwd", "env", "path", "mount", "model", "window", "abi", "approval", "tools",
		"system.md", "prompt.template.md", "policy", "meta.json", "protect"}
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
// the control's grammar. It is the single place where object install and
// check, ctx set, bootstrap and doctor validate control contents; the
// grammars themselves are package policy's parsers.
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
	var err error
	switch class + "/" + name {
	case "tool/description", "agent/system.md", "agent/prompt.template.md":
	case "tool/schema", "tool/program":
		err = validSchemaObject(value)
	case "tool/cap":
		err = nameLines(s, false)
	case "tool/policy", "agent/policy":
		_, err = policy.ParsePolicy(value)
	case "tool/mcp":
		_, err = ParseLocator(value)
	case "tool/annotations":
		_, err = ParseAnnotations(value)
	case "tool/input":
		_, err = ParseInput(value)
	case "tool/output.schema":
		err = validOutputSchema(value)
	case "agent/owner", "agent/uid", "agent/gid":
		_, err = policy.ParseID(name, value)
	case "agent/groups":
		_, err = policy.ParseGroups(value)
	case "agent/perm":
		_, err = policy.ParseCeiling(value)
	case "agent/label":
		_, _, err = policy.ParseLabel(value)
	case "agent/iso":
		_, err = policy.ParseIso(value)
	case "agent/life":
		_, err = policy.ParseLife(value)
	case "agent/abi":
		_, err = policy.ParseABI(value)
	case "agent/approval":
		_, err = policy.ParseApproval(value)
	case "agent/parent":
		_, err = policy.ParseParent(value)
	case "agent/root", "agent/cwd":
		_, err = policy.ParsePathControl(name, value)
	case "agent/env":
		_, err = policy.ParseEnv(value)
	case "agent/path":
		_, err = policy.ParsePath(value)
	case "agent/mount":
		_, err = policy.ParseMounts(value)
	case "agent/budgets":
		_, err = policy.ParseBudgets(value)
	case "agent/protect":
		_, err = policy.ParseProtect(value)
	case "agent/model":
		_, err = policy.ParseModel(value)
	case "agent/window":
		_, err = policy.ParseWindow(value)
	case "agent/tools":
		_, err = policy.ParseTools(value)
	case "agent/meta.json":
		var m map[string]any
		if len(strings.TrimSpace(s)) == 0 || s[strings.IndexFunc(s, notSpace)] != '{' || json.Unmarshal(value, &m) != nil {
			err = fmt.Errorf("must be a JSON object")
		}
	default:
		err = fmt.Errorf("unknown or runtime-owned control")
	}
	return err
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
