package policy

import (
	"bytes"
	"strconv"
	"strings"
)

// This file holds the grammars of the agent control files under
// agent/NAME.d/ other than policy (policy.go) and mount (mount.go). Each
// ParseX takes the raw bytes of one file and returns the value or a
// *ControlError naming the control, line and field.

// ---- label ----

// ParseLabel parses the label control and returns the label and the policy
// subject derived from it (see LabelSubject).
func ParseLabel(data []byte) (label, subject string, err error) {
	label, err = singleLine("label", data)
	if err != nil {
		return "", "", err
	}
	subject, err = LabelSubject(label)
	return label, subject, err
}

// LabelSubject derives the policy subject from a label. A label that is a
// valid object name is its own subject (reviewer_t). Otherwise it must be an
// SELinux-style context of exactly four colon-separated fields, each a valid
// object name (user_u:agent_r:coder_t:s0), and the subject is the third
// field, the type.
func LabelSubject(label string) (string, error) {
	if label == "" {
		return "", controlErr("label", 1, "label", KindInvalidValue, "empty label")
	}
	if ValidName(label) == nil {
		return label, nil
	}
	parts := strings.Split(label, ":")
	if len(parts) != 4 {
		return "", controlErr("label", 1, "label", KindInvalidValue,
			"label %s is neither a name nor a four-field context user:role:type:level", quote(label))
	}
	fieldNames := [4]string{"user", "role", "type", "level"}
	for i, p := range parts {
		if err := ValidName(p); err != nil {
			return "", controlErr("label", 1, fieldNames[i], KindInvalidName, "%s field %s: %s", fieldNames[i], quote(p), nameReason(err))
		}
	}
	return parts[2], nil
}

// ---- perm ----

// Ceiling is the coarse permission ceiling of the perm control: r gates the
// reading file tools, w the writing ones, x shell and terminal tools.
type Ceiling uint8

const (
	CeilingExec  Ceiling = 1 << iota // x
	CeilingWrite                     // w
	CeilingRead                      // r
	CeilingAll   = CeilingRead | CeilingWrite | CeilingExec
)

// String renders the canonical triplet, e.g. "r-x".
func (c Ceiling) String() string {
	b := []byte("---")
	if c&CeilingRead != 0 {
		b[0] = 'r'
	}
	if c&CeilingWrite != 0 {
		b[1] = 'w'
	}
	if c&CeilingExec != 0 {
		b[2] = 'x'
	}
	return string(b)
}

// letters renders only the set bits: "rx" for r-x.
func (c Ceiling) letters() string { return strings.ReplaceAll(c.String(), "-", "") }

// Has reports whether every bit of bits is in c.
func (c Ceiling) Has(bits Ceiling) bool { return c&bits == bits }

// ParseCeiling parses the perm control: exactly one triplet from "---" to
// "rwx" (r or - first, w or - second, x or - third).
func ParseCeiling(data []byte) (Ceiling, error) {
	s, err := singleLine("perm", data)
	if err != nil {
		return 0, err
	}
	if len(s) != 3 {
		return 0, controlErr("perm", 1, "perm", KindInvalidValue, "perm %s is not a triplet from --- to rwx", quote(s))
	}
	var c Ceiling
	for i, bit := range [3]struct {
		letter byte
		bit    Ceiling
	}{{'r', CeilingRead}, {'w', CeilingWrite}, {'x', CeilingExec}} {
		switch s[i] {
		case bit.letter:
			c |= bit.bit
		case '-':
		default:
			return 0, controlErr("perm", 1, "perm", KindInvalidValue, "perm %s: position %d must be %c or -", quote(s), i+1, bit.letter)
		}
	}
	return c, nil
}

// CeilingFor returns the perm bit that gates tool, and false when the
// ceiling does not govern it: every other tool is governed by policy
// alone. A switch, not a map, so that no applet's start builds one.
func CeilingFor(tool string) (Ceiling, bool) {
	switch tool {
	case "fs.read", "fs.list", "fs.stat":
		return CeilingRead, true
	case "fs.write", "fs.replace":
		return CeilingWrite, true
	case "shell.exec", "bash", "tmux", "zellij":
		return CeilingExec, true
	}
	return 0, false
}

// ---- owner, uid, gid, groups ----

// MaxID is the largest uid or gid accepted. 4294967295 is (uid_t)-1, which
// setuid(2) and chown(2) treat as "no change", so it is never an identity.
const MaxID = 1<<32 - 2

// parseID parses a canonical decimal id: "0" or a digit 1-9 followed by
// digits, no sign, no blanks, at most MaxID.
func parseID(s string) (uint32, string, bool) {
	if s == "" {
		return 0, "empty", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, quote(s) + " is not a decimal number", false
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, quote(s) + " has a leading zero", false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n > MaxID {
		return 0, quote(s) + " is larger than " + strconv.Itoa(MaxID), false
	}
	return uint32(n), "", true
}

// ParseID parses a one-line id control (owner, uid or gid); control names
// the file for errors.
func ParseID(control string, data []byte) (uint32, error) {
	s, err := singleLine(control, data)
	if err != nil {
		return 0, err
	}
	n, reason, ok := parseID(s)
	if !ok {
		return 0, controlErr(control, 1, control, KindInvalidValue, "%s", reason)
	}
	return n, nil
}

// ParseGroups parses the groups control: one canonical gid per line, no
// duplicates, no blank lines. An empty file means no supplementary groups.
func ParseGroups(data []byte) ([]uint32, error) {
	var groups []uint32
	seen := map[uint32]int{}
	err := eachLine(data, func(num int, line []byte, _ bool) error {
		g, reason, ok := parseID(string(line))
		if !ok {
			return controlErr("groups", num, "gid", KindInvalidValue, "%s", reason)
		}
		if first, dup := seen[g]; dup {
			return controlErr("groups", num, "gid", KindDuplicate, "gid %d already on line %d", g, first)
		}
		seen[g] = num
		groups = append(groups, g)
		return nil
	})
	return groups, err
}

// FormatGroups renders a groups control.
func FormatGroups(groups []uint32) []byte {
	var b bytes.Buffer
	for _, g := range groups {
		b.WriteString(strconv.FormatUint(uint64(g), 10))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ---- enumerations: iso, life, approval, abi ----

// Iso is the isolation profile of the iso control.
type Iso string

const (
	IsoUnset    Iso = ""         // no iso control: chosen from the caller (see Agent.Isolation)
	IsoShared   Iso = "shared"   // no namespaces; identity from the environment only
	IsoUID      Iso = "uid"      // namespaces plus setuid/setgid to the agent's ids (root caller)
	IsoUserns   Iso = "userns"   // namespaces under a user namespace (non-root caller)
	IsoLandlock Iso = "landlock" // no namespaces: Landlock, seccomp and limits on the caller's view
	IsoAuto     Iso = "auto"     // the strongest of userns/uid, then landlock, that works here
)

// Life is the lifetime of the life control.
type Life string

const (
	LifeOwned Life = "owned" // stopped with its parent; the default
	LifeTemp  Life = "temp"  // stopped with its parent, meant to be short-lived
)

// Approval is the approval mode of the approval control.
type Approval string

const (
	ApprovalAuto Approval = "auto"
	ApprovalAsk  Approval = "ask"
)

// ABI is the agent program ABI of the abi control.
type ABI string

const (
	ABIArgv        ABI = "argv-v1"         // a program started with argv; what ctx runs
	ABISDKEnvelope ABI = "sdk-envelope-v1" // the socket-hosted loop: accepted as data, not run by ctx
)

// oneOf parses a one-line control whose value must be one of words.
func oneOf(control string, data []byte, words ...string) (string, error) {
	s, err := singleLine(control, data)
	if err != nil {
		return "", err
	}
	for _, w := range words {
		if s == w {
			return s, nil
		}
	}
	return "", controlErr(control, 1, control, KindInvalidValue, "%s is not one of %s", quote(s), strings.Join(words, " "))
}

// ParseIso parses the iso control: auto, userns, uid, landlock or shared.
func ParseIso(data []byte) (Iso, error) {
	s, err := oneOf("iso", data, string(IsoAuto), string(IsoUserns), string(IsoUID), string(IsoLandlock), string(IsoShared))
	return Iso(s), err
}

// ParseLife parses the life control: owned or temp ("detached" is reserved
// by the reference and refused here).
func ParseLife(data []byte) (Life, error) {
	s, err := oneOf("life", data, string(LifeOwned), string(LifeTemp))
	return Life(s), err
}

// ParseApproval parses the approval control: auto or ask.
func ParseApproval(data []byte) (Approval, error) {
	s, err := oneOf("approval", data, string(ApprovalAuto), string(ApprovalAsk))
	return Approval(s), err
}

// ParseABI parses the abi control: argv-v1 or sdk-envelope-v1.
func ParseABI(data []byte) (ABI, error) {
	s, err := oneOf("abi", data, string(ABIArgv), string(ABISDKEnvelope))
	return ABI(s), err
}

// ---- parent ----

// Parent is the lineage recorded in the parent control. The zero value
// (Agent == "") means a top-level agent.
type Parent struct {
	Agent   string
	Session string // optional
	Run     string // optional
}

// String renders the canonical one-line form without a newline; "" for a
// top-level agent.
func (p Parent) String() string {
	if p.Agent == "" {
		return ""
	}
	s := "agent:" + p.Agent
	if p.Session != "" {
		s += " session:" + p.Session
	}
	if p.Run != "" {
		s += " run:" + p.Run
	}
	return s
}

// ParseParent parses the parent control: "agent:NAME", optionally followed
// by " session:S" and then " run:R", each separated by exactly one space,
// in that order. Every value is an object name. An empty file (or an empty
// line) means a top-level agent, the same as no parent control.
func ParseParent(data []byte) (Parent, error) {
	s, err := singleLine("parent", data)
	if err != nil || s == "" {
		return Parent{}, err
	}
	var p Parent
	parts := strings.Split(s, " ")
	if len(parts) > 3 {
		return Parent{}, controlErr("parent", 1, "", KindFieldCount, "expected agent:NAME [session:S] [run:R], found %d fields", len(parts))
	}
	next := 0 // index into keys of the next key allowed
	keys := [3]string{"agent", "session", "run"}
	for i, part := range parts {
		key, val, ok := strings.Cut(part, ":")
		k := -1
		for j := next; j < len(keys); j++ {
			if ok && key == keys[j] {
				k = j
			}
		}
		switch {
		case i == 0 && key != "agent":
			return Parent{}, controlErr("parent", 1, "agent", KindInvalidValue, "must start with agent:NAME, found %s", quote(part))
		case k < 0:
			field := "" // an unknown key is untrusted text: it goes in the quoted reason only
			if key == "agent" || key == "session" || key == "run" {
				field = key
			}
			return Parent{}, controlErr("parent", 1, field, KindInvalidValue, "field %s is not session:S or run:R in that order (fields are separated by one space)", quote(part))
		}
		if err := ValidName(val); err != nil {
			return Parent{}, controlErr("parent", 1, keys[k], KindInvalidName, "%s %s: %s", keys[k], quote(val), nameReason(err))
		}
		switch k {
		case 0:
			p.Agent = val
		case 1:
			p.Session = val
		case 2:
			p.Run = val
		}
		next = k + 1
	}
	return p, nil
}

// ---- env ----

// ---- path ----

// ---- tools ----

// ---- window ----

// ---- model ----
