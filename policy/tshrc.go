package policy

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// The user's tsh path file, CTX_HOME/.tshrc. It is data, never shell code:
//
//	# my tools first
//	CTX_PATH=/ctx/home/1000/tool:/ctx/tool:/ctx/shared/project-a/tool
//
// Blank lines and '#' comment lines are ignored and blanks around a whole
// line are trimmed, as in tsh.d/config. Exactly one CTX_PATH= line is
// required; any other line (an "export", another variable, a second
// CTX_PATH) is an error. The value is a ':'-separated list of absolute,
// clean, non-empty directories, each one of the three tool tiers:
//
//	ROOT/tool                 the system tier
//	ROOT/home/UID/tool        the caller's own user tier (also CTX_HOME/tool)
//	ROOT/shared/SPACE/tool    a shared space's tier
//
// Anything else (/usr/bin, another user's home, a relative or "."/".."
// path) is refused, so a .tshrc can reorder and narrow the tool tiers but
// never turns tsh into a PATH shell. Components written under /ctx are
// re-rooted when a custom root is in use, so one .tshrc serves a test tree
// as well as the real one.

// TshrcScope says which tool directories a .tshrc may name.
type TshrcScope struct {
	Root string // the selected root, absolute and clean ("/ctx")
	UID  int    // the effective uid: ROOT/home/UID/tool is allowed
	Home string // CTX_HOME, absolute and clean; HOME/tool is allowed
}

// defaultRootPrefix is the root .tshrc components are written against.
const defaultRootPrefix = "/ctx"

// ParseTshrc parses a .tshrc and returns its CTX_PATH directories, re-rooted
// under scope.Root. Errors are *ControlError naming the line (line 0 for
// a file without a CTX_PATH line).
func ParseTshrc(data []byte, scope TshrcScope) ([]string, error) {
	var dirs []string
	found := 0
	err := tshLines(data, func(num int, line string) error {
		if strings.HasPrefix(line, "export ") || strings.HasPrefix(line, "export\t") {
			return syntaxErr(num, KindInvalidValue, "\"export\" is shell syntax; .tshrc is data: write CTX_PATH=DIR:DIR")
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return syntaxErr(num, KindInvalidValue, "%s: not CTX_PATH=DIR:DIR", tshQuote(line))
		}
		if key != "CTX_PATH" {
			return syntaxErr(num, KindInvalidValue, "unknown key %s (the only key is CTX_PATH)", tshQuote(key))
		}
		if found != 0 {
			return syntaxErr(num, KindDuplicate, "CTX_PATH given twice (first on line %d)", found)
		}
		found = num
		if value == "" {
			return syntaxErr(num, KindInvalidValue, "CTX_PATH is empty")
		}
		if value[0] == '"' || value[0] == '\'' {
			return syntaxErr(num, KindInvalidValue, "quotes are shell syntax; write the directories bare")
		}
		for i, comp := range strings.Split(value, ":") {
			dir, err := tshrcDir(comp, scope)
			if err != nil {
				return syntaxErr(num, KindInvalidPath, "component %d: %v", i+1, err)
			}
			dirs = append(dirs, dir)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == 0 {
		return nil, syntaxErr(0, KindMissing, "no CTX_PATH= line")
	}
	return dirs, nil
}

// tshrcDir checks one CTX_PATH component and returns it re-rooted.
func tshrcDir(comp string, scope TshrcScope) (string, error) {
	switch {
	case comp == "":
		return "", fmt.Errorf("empty directory")
	case comp[0] != '/':
		return "", fmt.Errorf("%s is not absolute", tshQuote(comp))
	case path.Clean(comp) != comp:
		// Lexical cleaning of ".." is wrong when a component is a symlink,
		// so unclean paths are refused rather than cleaned.
		return "", fmt.Errorf("%s is not a clean path (no //, ., .. or trailing /)", tshQuote(comp))
	}
	dir := comp
	if scope.Root != defaultRootPrefix && (comp == defaultRootPrefix || strings.HasPrefix(comp, defaultRootPrefix+"/")) {
		dir = path.Join(scope.Root, comp[len(defaultRootPrefix):])
	}
	if !IsToolTier(dir, scope) {
		allowed := []string{path.Join(scope.Root, "tool"), path.Join(scope.Root, "home", strconv.Itoa(scope.UID), "tool")}
		if h := path.Join(scope.Home, "tool"); scope.Home != "" && h != allowed[1] {
			allowed = append(allowed, h)
		}
		allowed = append(allowed, path.Join(scope.Root, "shared", "SPACE", "tool"))
		return "", fmt.Errorf("%s is not a tool tier (allowed: %s)", tshQuote(comp), strings.Join(allowed, ", "))
	}
	return dir, nil
}

// IsToolTier reports whether dir is one of the tool tiers a .tshrc may
// name: ROOT/tool, ROOT/home/UID/tool, HOME/tool or ROOT/shared/SPACE/tool
// with SPACE a valid object name.
func IsToolTier(dir string, scope TshrcScope) bool {
	if dir == path.Join(scope.Root, "tool") ||
		dir == path.Join(scope.Root, "home", strconv.Itoa(scope.UID), "tool") ||
		scope.Home != "" && dir == path.Join(scope.Home, "tool") {
		return true
	}
	rest, ok := strings.CutPrefix(dir, path.Join(scope.Root, "shared")+"/")
	if !ok {
		return false
	}
	space, tail, ok := strings.Cut(rest, "/")
	return ok && tail == "tool" && ValidName(space) == nil
}
