package object

import (
	"fmt"
	"strconv"
	"strings"
)

// CortexFSVersion is the CortexFS ABI version this ctx implements. A v2
// manifest's compatibility.cortexfs requirement must match it.
const CortexFSVersion = "0.1.7"

// CortexFSRequirement is the requirement ctx writes into the manifests it
// generates (ctxmcp project): this version up to the next breaking one.
const CortexFSRequirement = ">=0.1.7, <0.2.0"

// Version is a SemVer 2.0.0 version.
type Version struct {
	Major, Minor, Patch uint64
	Pre                 []string // pre-release identifiers, empty for a release
	Build               string   // build metadata, ignored in comparisons
}

const maxVersionLen = 256

// ParseVersion parses "MAJOR.MINOR.PATCH[-PRE][+BUILD]" exactly: numbers
// without leading zeros, non-empty dot-separated identifiers.
func ParseVersion(s string) (Version, error) {
	var v Version
	if len(s) > maxVersionLen {
		return v, fmt.Errorf("version longer than %d bytes", maxVersionLen)
	}
	rest := s
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		v.Build = rest[i+1:]
		rest = rest[:i]
		if err := checkIdents(v.Build, false); err != nil {
			return v, fmt.Errorf("version %q: build metadata: %v", s, err)
		}
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		pre := rest[i+1:]
		rest = rest[:i]
		if err := checkIdents(pre, true); err != nil {
			return v, fmt.Errorf("version %q: pre-release: %v", s, err)
		}
		v.Pre = strings.Split(pre, ".")
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("version %q: want MAJOR.MINOR.PATCH", s)
	}
	nums := [3]*uint64{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		n, err := parseNumeric(p)
		if err != nil {
			return v, fmt.Errorf("version %q: %v", s, err)
		}
		*nums[i] = n
	}
	return v, nil
}

func parseNumeric(p string) (uint64, error) {
	if p == "" {
		return 0, fmt.Errorf("empty number")
	}
	if len(p) > 1 && p[0] == '0' {
		return 0, fmt.Errorf("number %q has a leading zero", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return 0, fmt.Errorf("%q is not a number", p)
		}
	}
	n, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("number %q is too large", p)
	}
	return n, nil
}

// checkIdents checks dot-separated identifiers of [0-9A-Za-z-]; numeric
// pre-release identifiers must not have leading zeros.
func checkIdents(s string, pre bool) error {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return fmt.Errorf("empty identifier")
		}
		numeric := true
		for i := 0; i < len(id); i++ {
			c := id[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			default:
				return fmt.Errorf("identifier %q: byte %q is not one of 0-9 A-Z a-z -", id, c)
			}
		}
		if pre && numeric && len(id) > 1 && id[0] == '0' {
			return fmt.Errorf("numeric identifier %q has a leading zero", id)
		}
	}
	return nil
}

// Compare orders versions by SemVer precedence (build metadata ignored).
func (v Version) Compare(w Version) int {
	for _, d := range [3][2]uint64{{v.Major, w.Major}, {v.Minor, w.Minor}, {v.Patch, w.Patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(v.Pre) == 0 && len(w.Pre) == 0:
		return 0
	case len(v.Pre) == 0:
		return 1 // a release is higher than its pre-releases
	case len(w.Pre) == 0:
		return -1
	}
	for i := 0; i < len(v.Pre) && i < len(w.Pre); i++ {
		if c := compareIdent(v.Pre[i], w.Pre[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(v.Pre) < len(w.Pre):
		return -1
	case len(v.Pre) > len(w.Pre):
		return 1
	}
	return 0
}

func compareIdent(a, b string) int {
	na, ea := strconv.ParseUint(a, 10, 64)
	nb, eb := strconv.ParseUint(b, 10, 64)
	switch {
	case ea == nil && eb == nil:
		if na != nb {
			if na < nb {
				return -1
			}
			return 1
		}
		return 0
	case ea == nil:
		return -1 // numeric identifiers sort before alphanumeric ones
	case eb == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// Requirement is a Cargo-style version requirement: comma-separated
// comparators that must all match.
type Requirement struct {
	comps []comparator
}

type comparator struct {
	op                  string // "=", ">", ">=", "<", "<=", "~", "^", "*"
	major, minor, patch uint64
	hasMinor, hasPatch  bool
	pre                 []string
}

const maxComparators = 32

// ParseRequirement parses a Cargo-style requirement such as
// ">=0.1.7, <0.2.0", "^0.1", "~1.2.3", "=1.0.0", "1.2" (a bare version is a
// caret requirement) or "*" / "1.*" (wildcards).
func ParseRequirement(s string) (Requirement, error) {
	var r Requirement
	if len(s) > maxVersionLen {
		return r, fmt.Errorf("requirement longer than %d bytes", maxVersionLen)
	}
	if strings.TrimSpace(s) == "" {
		return r, fmt.Errorf("empty requirement")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxComparators {
		return r, fmt.Errorf("requirement %q has more than %d comparators", s, maxComparators)
	}
	for _, p := range parts {
		c, err := parseComparator(strings.TrimSpace(p))
		if err != nil {
			return r, fmt.Errorf("requirement %q: %v", s, err)
		}
		r.comps = append(r.comps, c)
	}
	return r, nil
}

func parseComparator(s string) (comparator, error) {
	var c comparator
	if s == "" {
		return c, fmt.Errorf("empty comparator")
	}
	for _, op := range []string{">=", "<=", "=", ">", "<", "~", "^"} {
		if strings.HasPrefix(s, op) {
			c.op = op
			s = strings.TrimSpace(s[len(op):])
			break
		}
	}
	if s == "*" || s == "x" || s == "X" {
		if c.op != "" {
			return c, fmt.Errorf("wildcard %q cannot follow an operator", s)
		}
		c.op = "*"
		return c, nil
	}
	rest := s
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		if err := checkIdents(rest[i+1:], false); err != nil {
			return c, fmt.Errorf("%q: build metadata: %v", s, err)
		}
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		if err := checkIdents(rest[i+1:], true); err != nil {
			return c, fmt.Errorf("%q: pre-release: %v", s, err)
		}
		c.pre = strings.Split(rest[i+1:], ".")
		rest = rest[:i]
	}
	parts := strings.Split(rest, ".")
	if len(parts) > 3 {
		return c, fmt.Errorf("%q has more than three numbers", s)
	}
	wild := false
	for i, p := range parts {
		if p == "*" || p == "x" || p == "X" {
			if i == 0 {
				return c, fmt.Errorf("%q: a wildcard cannot replace the major version", s)
			}
			wild = true
			continue
		}
		if wild {
			return c, fmt.Errorf("%q: a number cannot follow a wildcard", s)
		}
		n, err := parseNumeric(p)
		if err != nil {
			return c, fmt.Errorf("%q: %v", s, err)
		}
		switch i {
		case 0:
			c.major = n
		case 1:
			c.minor, c.hasMinor = n, true
		case 2:
			c.patch, c.hasPatch = n, true
		}
	}
	if wild {
		// "1.*" and "1.2.*" mean the same as "=1" and "=1.2".
		if c.op != "" && c.op != "=" {
			return c, fmt.Errorf("%q: a wildcard works only without an operator or with =", s)
		}
		c.op = "="
	}
	if c.pre != nil && !c.hasPatch {
		return c, fmt.Errorf("%q: a pre-release needs MAJOR.MINOR.PATCH", s)
	}
	if c.op == "" {
		c.op = "^" // a bare version is a caret requirement, as in Cargo
	}
	return c, nil
}

// Matches reports whether v satisfies every comparator. As in Cargo, a
// pre-release version matches only when some comparator names the same
// MAJOR.MINOR.PATCH with a pre-release.
func (r Requirement) Matches(v Version) bool {
	if len(r.comps) == 0 {
		return false
	}
	for _, c := range r.comps {
		if !c.matches(v) {
			return false
		}
	}
	if len(v.Pre) == 0 {
		return true
	}
	for _, c := range r.comps {
		if c.pre != nil && c.major == v.Major && c.minor == v.Minor && c.patch == v.Patch {
			return true
		}
	}
	return false
}

func (c comparator) version() Version {
	return Version{Major: c.major, Minor: c.minor, Patch: c.patch, Pre: c.pre}
}

func (c comparator) matches(v Version) bool {
	cmp := func() int { return v.Compare(c.version()) }
	switch c.op {
	case "*":
		return true
	case "=":
		return c.matchesExact(v)
	case ">":
		switch {
		case !c.hasMinor:
			return v.Major > c.major
		case !c.hasPatch:
			return v.Major > c.major || v.Major == c.major && v.Minor > c.minor
		}
		return cmp() > 0
	case ">=":
		switch {
		case !c.hasMinor:
			return v.Major >= c.major
		case !c.hasPatch:
			return v.Major > c.major || v.Major == c.major && v.Minor >= c.minor
		}
		return cmp() >= 0
	case "<":
		switch {
		case !c.hasMinor:
			return v.Major < c.major
		case !c.hasPatch:
			return v.Major < c.major || v.Major == c.major && v.Minor < c.minor
		}
		return cmp() < 0
	case "<=":
		switch {
		case !c.hasMinor:
			return v.Major <= c.major
		case !c.hasPatch:
			return v.Major < c.major || v.Major == c.major && v.Minor <= c.minor
		}
		return cmp() <= 0
	case "~":
		if !c.hasPatch {
			return c.matchesExact(v)
		}
		return v.Major == c.major && v.Minor == c.minor && cmp() >= 0
	case "^":
		if v.Major != c.major {
			return false
		}
		switch {
		case !c.hasMinor:
			return true
		case !c.hasPatch:
			if c.major > 0 {
				return v.Minor >= c.minor
			}
			return v.Minor == c.minor
		case c.major > 0:
			return cmp() >= 0
		case c.minor > 0:
			return v.Minor == c.minor && cmp() >= 0
		}
		return v.Minor == c.minor && v.Patch == c.patch && cmp() >= 0
	}
	return false
}

// matchesExact is "=" with partial versions: =1 is 1.x.y, =1.2 is 1.2.x.
func (c comparator) matchesExact(v Version) bool {
	switch {
	case !c.hasMinor:
		return v.Major == c.major
	case !c.hasPatch:
		return v.Major == c.major && v.Minor == c.minor
	}
	return v.Compare(c.version()) == 0
}
