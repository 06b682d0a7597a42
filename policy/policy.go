package policy

import (
	"bytes"
	"strings"
)

// Policy v0 is a type-enforcement allowlist borrowed from SELinux, reduced to
// one statement:
//
//	allow <subject_type> <object_class>:<object_name> <permission>
//
// Default deny, no deny rules, no globs, no comments, no priorities,
// variables or inheritance. A request is allowed iff a rule matches subject,
// class, name and permission exactly.

// Class is a policy object class.
type Class uint8

const (
	ClassTool Class = iota + 1
	ClassModel
	ClassShared
	ClassSession
	ClassMount
	ClassAgent
	ClassNetwork
)

// Permission is a policy permission. Which permissions a class accepts is
// fixed (see Class.Permissions).
type Permission uint8

const (
	PermExecute Permission = iota + 1
	PermUse
	PermRead
	PermWrite
	PermResume
	PermCreate
	PermStart
	PermStop
	PermConnect
)

var classNames = [...]string{
	ClassTool:    "tool",
	ClassModel:   "model",
	ClassShared:  "shared",
	ClassSession: "session",
	ClassMount:   "mount",
	ClassAgent:   "agent",
	ClassNetwork: "network",
}

var permissionNames = [...]string{
	PermExecute: "execute",
	PermUse:     "use",
	PermRead:    "read",
	PermWrite:   "write",
	PermResume:  "resume",
	PermCreate:  "create",
	PermStart:   "start",
	PermStop:    "stop",
	PermConnect: "connect",
}

// classPermissions is the seed's fixed permission set, in its order.
var classPermissions = [...][]Permission{
	ClassTool:    {PermExecute},
	ClassModel:   {PermUse},
	ClassShared:  {PermRead, PermWrite},
	ClassSession: {PermRead, PermWrite, PermResume},
	ClassMount:   {PermRead, PermWrite},
	ClassAgent:   {PermCreate, PermStart, PermStop, PermRead, PermWrite},
	ClassNetwork: {PermConnect},
}

// NetworkDefault is the network object that grants everything; the other
// network object names are hosts (network.go).
const NetworkDefault = "default"

func (c Class) String() string {
	if c > 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return "class?"
}

func (p Permission) String() string {
	if p > 0 && int(p) < len(permissionNames) {
		return permissionNames[p]
	}
	return "permission?"
}

// Permissions returns the fixed permission set of c.
func (c Class) Permissions() []Permission {
	if c > 0 && int(c) < len(classPermissions) {
		return append([]Permission(nil), classPermissions[c]...)
	}
	return nil
}

// Accepts reports whether p belongs to c's permission set.
func (c Class) Accepts(p Permission) bool {
	if c == 0 || int(c) >= len(classPermissions) {
		return false
	}
	for _, q := range classPermissions[c] {
		if q == p {
			return true
		}
	}
	return false
}

// LookupClass returns the class spelled s (case-sensitive).
func LookupClass(s string) (Class, bool) {
	for c := ClassTool; c <= ClassNetwork; c++ {
		if classNames[c] == s {
			return c, true
		}
	}
	return 0, false
}

// lookupPermission returns the permission spelled s if c accepts it.
func lookupPermission(c Class, s string) (Permission, bool) {
	for _, p := range classPermissions[c] {
		if permissionNames[p] == s {
			return p, true
		}
	}
	return 0, false
}

// validObjectName checks an object name for its class: model names are
// model references (provider/model or an alias), network names are
// "default" or hosts (ParseNetworkTarget), every other class uses the
// object-name grammar.
func validObjectName(c Class, name string) (reason string, ok bool) {
	switch c {
	case ClassModel:
		if err := ValidModelRef(name); err != nil {
			return nameReason(err), false
		}
	case ClassNetwork:
		if _, reason := parseNetworkTarget(name); reason != "" {
			return reason, false
		}
	default:
		if err := ValidName(name); err != nil {
			return nameReason(err), false
		}
	}
	return "", true
}

// Object is a policy object: a class and a name.
type Object struct {
	Class Class
	Name  string
}

func (o Object) String() string { return o.Class.String() + ":" + o.Name }

// ParseObject parses "CLASS:NAME" as a request names it. A malformed one
// (an unknown class, a bad object name) is a *ControlError with only its
// kind and reason; it unwraps to EINVAL, as the seed asks.
func ParseObject(s string) (Object, error) {
	cls, name, ok := strings.Cut(s, ":")
	if !ok || cls == "" {
		return Object{}, syntaxErr(0, KindInvalidObject, "object %s is not CLASS:NAME", quote(s))
	}
	c, ok := LookupClass(cls)
	if !ok {
		return Object{}, syntaxErr(0, KindUnknownClass, "unknown class %s", quote(cls))
	}
	if reason, ok := validObjectName(c, name); !ok {
		return Object{}, syntaxErr(0, KindInvalidName, "%s name %s: %s", c, quote(name), reason)
	}
	return Object{c, canonicalName(c, name)}, nil
}

// ParsePermission parses a permission of class c.
func ParsePermission(c Class, s string) (Permission, error) {
	if c == 0 || int(c) >= len(classPermissions) {
		return 0, syntaxErr(0, KindUnknownClass, "unknown class")
	}
	p, ok := lookupPermission(c, s)
	if !ok {
		return 0, syntaxErr(0, KindUnknownPermission, "unknown permission %s for class %s (%s)", quote(s), c, permList(c))
	}
	return p, nil
}

func permList(c Class) string {
	var names []string
	for _, p := range classPermissions[c] {
		names = append(names, p.String())
	}
	return strings.Join(names, " ")
}

// Rule is one policy line.
type Rule struct {
	Subject    string
	Object     Object
	Permission Permission
}

// String renders the rule in canonical form, without a newline.
func (r Rule) String() string {
	return "allow " + r.Subject + " " + r.Object.String() + " " + r.Permission.String()
}

// ruleKey is the decision map key. Class and permission are small integers,
// so a lookup hashes two short strings and never allocates.
type ruleKey struct {
	subject, name string
	class         Class
	perm          Permission
}

// Policy is a parsed policy file. The zero value and nil allow nothing.
type Policy struct {
	rules []Rule
	set   map[ruleKey]struct{}
}

// Rules returns the rules in file order (duplicates included).
func (p *Policy) Rules() []Rule {
	if p == nil {
		return nil
	}
	return append([]Rule(nil), p.rules...)
}

// Len is the number of rule lines.
func (p *Policy) Len() int {
	if p == nil {
		return 0
	}
	return len(p.rules)
}

// Allows reports whether a rule grants subject perm on obj. It is one map
// lookup.
func (p *Policy) Allows(subject string, obj Object, perm Permission) bool {
	if p == nil {
		return false
	}
	_, ok := p.set[ruleKey{subject, obj.Name, obj.Class, perm}]
	return ok
}

// Format renders the policy canonically: one rule per line, single spaces,
// file order, LF endings. Parsing the result gives the same policy.
func (p *Policy) Format() []byte {
	var b bytes.Buffer
	for _, r := range p.Rules() {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func (p *Policy) add(r Rule) {
	p.rules = append(p.rules, r)
	p.set[ruleKey{r.Subject, r.Object.Name, r.Object.Class, r.Permission}] = struct{}{}
}

// ParsePolicy parses a policy file. Lines are separated by LF (a CR before
// it is dropped); a line holding only ASCII whitespace is skipped; every
// other line must be exactly four fields separated by ASCII whitespace:
// "allow", a subject name, CLASS:NAME and a permission of that class. There
// is no comment syntax: a line starting with # is an error like any other.
// One bad line rejects the whole file; the error is a *ControlError naming
// the line and field.
func ParsePolicy(data []byte) (*Policy, error) {
	// One conversion for the whole file: every subject and object name is
	// then a substring of it, so a rule costs no string allocation.
	text := string(data)
	n := strings.Count(text, "\n") + 1
	p := &Policy{rules: make([]Rule, 0, n), set: make(map[ruleKey]struct{}, n)}
	var fields [4]string
	for num := 1; len(text) > 0; num++ {
		hash := -1 // the index of the first field starting with '#'

		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		nf := 0
		for i := 0; i < len(line); {
			for i < len(line) && isSpace(line[i]) {
				i++
			}
			if i == len(line) {
				break
			}
			start := i
			for i < len(line) && !isSpace(line[i]) {
				i++
			}
			if nf < len(fields) {
				fields[nf] = line[start:i]
			}
			if hash < 0 && line[start] == '#' {
				hash = nf
			}
			nf++
		}
		if nf == 0 {
			continue // blank line (a trailing CR counts as blank space)
		}
		r, err := parseRule(num, nf, fields)
		if err != nil {
			return nil, commentHint(err, hash)
		}
		p.add(r)
	}
	return p, nil
}

// commentHint adds to a bad line's error that # starts no comment when a
// field of the line starts with #: whoever wrote it meant a comment, and
// "expected 4 fields" alone would not tell them why it is wrong.
func commentHint(err error, hash int) error {
	ce, ok := err.(*ControlError)
	if !ok || hash < 0 {
		return err
	}
	what := "delete the line"
	if hash > 0 {
		what = "delete the text from # on"
	}
	ce.Reason += "; # is not a comment: policy files have no comment syntax (ctx man policy), " + what
	return ce
}

func parseRule(num, nf int, f [4]string) (Rule, error) {
	if nf != 4 {
		return Rule{}, controlErr("policy", num, "", KindFieldCount, "expected 4 fields (allow SUBJECT CLASS:NAME PERMISSION), found %d", nf)
	}
	if f[0] != "allow" {
		return Rule{}, controlErr("policy", num, "statement", KindExpectedAllow, "expected \"allow\", found %s", quote(f[0]))
	}
	if err := ValidName(f[1]); err != nil {
		return Rule{}, controlErr("policy", num, "subject", KindInvalidName, "subject %s: %s", quote(f[1]), nameReason(err))
	}
	cls, name, ok := strings.Cut(f[2], ":")
	if !ok || cls == "" {
		return Rule{}, controlErr("policy", num, "object", KindInvalidObject, "object %s is not CLASS:NAME", quote(f[2]))
	}
	c, ok := LookupClass(cls)
	if !ok {
		return Rule{}, controlErr("policy", num, "class", KindUnknownClass, "unknown class %s (tool model shared session mount agent network)", quote(cls))
	}
	if reason, ok := validObjectName(c, name); !ok {
		return Rule{}, controlErr("policy", num, "name", KindInvalidName, "%s name %s: %s", c, quote(name), reason)
	}
	perm, ok := lookupPermission(c, f[3])
	if !ok {
		return Rule{}, controlErr("policy", num, "permission", KindUnknownPermission, "unknown permission %s for class %s (%s)", quote(f[3]), c, permList(c))
	}
	return Rule{f[1], Object{c, canonicalName(c, name)}, perm}, nil
}

// canonicalName is a valid object name in the one spelling rules are
// matched by: a network host loses a final dot; other names are as
// written.
func canonicalName(c Class, name string) string {
	if c == ClassNetwork && strings.Contains(name, ".") {
		return canonicalNetworkName(name)
	}
	return name
}
