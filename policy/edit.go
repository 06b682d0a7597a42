package policy

import (
	"bytes"
	"strings"
)

// ParseRule parses one rule given as its three parts (SUBJECT,
// CLASS:NAME, PERMISSION), with the grammar of a policy line: what ctx
// policy allow and revoke are handed is checked exactly as the file that
// will hold it.
func ParseRule(subject, object, perm string) (Rule, error) {
	for _, f := range []string{subject, object, perm} {
		if f == "" || strings.ContainsAny(f, " \t\r\n\v\f") {
			return Rule{}, controlErr("policy", 1, "", KindFieldCount, "each of SUBJECT CLASS:NAME PERMISSION must be one non-empty word, got %s", quote(f))
		}
	}
	p, err := ParsePolicy([]byte("allow " + subject + " " + object + " " + perm + "\n"))
	if err != nil {
		return Rule{}, err
	}
	return p.rules[0], nil
}

// AddRule returns a policy file's data with r appended as one canonical
// line, and whether it changed: a file whose rules already grant r is
// returned as it was. Every other byte is kept (a missing final newline
// is supplied). data must parse; a file that does not is never extended.
func AddRule(data []byte, r Rule) ([]byte, bool, error) {
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, false, err
	}
	if p.Allows(r.Subject, r.Object, r.Permission) {
		return data, false, nil
	}
	out := append([]byte(nil), data...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, r.String()+"\n"...)
	return out, true, nil
}

// RemoveRule returns a policy file's data without every line that states
// r (whatever its spacing), and whether any was removed. The other lines
// are kept byte for byte. data must parse.
func RemoveRule(data []byte, r Rule) ([]byte, bool, error) {
	if _, err := ParsePolicy(data); err != nil {
		return nil, false, err
	}
	var out []byte
	removed := false
	for rest := data; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			rest = nil
		}
		// A lone line of a file that parsed parses alone.
		if p, err := ParsePolicy(line); err == nil && p.Len() == 1 && p.rules[0] == r {
			removed = true
			continue
		}
		out = append(out, line...)
	}
	if !removed {
		return data, false, nil
	}
	return out, true, nil
}
