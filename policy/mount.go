package policy

import (
	"bytes"
	"strings"
)

// BindKind is how a mount entry binds its source.
type BindKind uint8

const (
	// BindDefault: neither bind nor rbind was written. The entry is still a
	// bind mount of its source (a path cannot be mounted any other way),
	// non-recursive, exactly like "bind".
	BindDefault   BindKind = iota
	BindFlat               // "bind": the source alone, without the mounts below it
	BindRecursive          // "rbind": the source and every mount below it
)

// rank orders bind kinds by how much of the host they can reveal: a
// recursive bind shows submounts a plain bind hides.
func (k BindKind) rank() int {
	if k == BindRecursive {
		return 2
	}
	return 1
}

// Mount is one entry of an agent's mount view: a host source directory or
// file shown at a target path inside the sandbox. It is both a line of the
// mount control and the plain-data entry the sandbox plan applies.
type Mount struct {
	Source   string // absolute host path
	Target   string // absolute sandbox path
	ReadOnly bool
	Bind     BindKind
	NoSuid   bool
	NoDev    bool
	NoExec   bool
}

// Options renders the canonical option field: the bind kind first, then
// nosuid, nodev, noexec; "-" when there are none.
func (m Mount) Options() string {
	var opts []string
	switch m.Bind {
	case BindFlat:
		opts = append(opts, "bind")
	case BindRecursive:
		opts = append(opts, "rbind")
	}
	if m.NoSuid {
		opts = append(opts, "nosuid")
	}
	if m.NoDev {
		opts = append(opts, "nodev")
	}
	if m.NoExec {
		opts = append(opts, "noexec")
	}
	if len(opts) == 0 {
		return "-"
	}
	return strings.Join(opts, ",")
}

// Mode is "ro" or "rw".
func (m Mount) Mode() string {
	if m.ReadOnly {
		return "ro"
	}
	return "rw"
}

// String renders the entry as one mount-control line without its newline.
func (m Mount) String() string {
	return m.Source + "\t" + m.Target + "\t" + m.Mode() + "\t" + m.Options()
}

// FormatMounts renders a mount control canonically.
func FormatMounts(mounts []Mount) []byte {
	var b bytes.Buffer
	for _, m := range mounts {
		b.WriteString(m.String())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ParseMounts parses the mount control, one entry per line:
//
//	source<TAB>target<TAB>ro|rw<TAB>options
//
// Source and target are absolute canonical paths without control bytes.
// Options is "-" (none) or a comma-separated list from bind, rbind, nosuid,
// nodev, noexec without repeats, where bind and rbind exclude each other.
// Lines holding nothing are skipped; there is no comment syntax. Each line
// is checked in a fixed order (field count, source, target, mode, options)
// and the first problem is reported. Two entries with the same target are
// refused: the second would silently hide the first.
func ParseMounts(data []byte) ([]Mount, error) {
	var mounts []Mount
	targets := map[string]int{}
	err := eachLine(data, func(num int, line []byte, _ bool) error {
		if len(line) == 0 {
			return nil
		}
		m, err := parseMountLine(num, string(line))
		if err != nil {
			return err
		}
		if first, dup := targets[m.Target]; dup {
			return controlErr("mount", num, "target", KindDuplicate, "target %s is already mounted on line %d", quote(m.Target), first)
		}
		targets[m.Target] = num
		mounts = append(mounts, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return mounts, nil
}

func parseMountLine(num int, line string) (Mount, error) {
	fields := strings.Split(line, "\t")
	if len(fields) != 4 {
		return Mount{}, controlErr("mount", num, "", KindFieldCount, "expected 4 tab-separated fields (source target ro|rw options), found %d", len(fields))
	}
	m := Mount{Source: fields[0], Target: fields[1]}
	for i, name := range [2]string{"source", "target"} {
		if reason, ok := CheckAbsPath(fields[i]); !ok {
			return Mount{}, controlErr("mount", num, name, KindInvalidPath, "%s", reason)
		}
	}
	switch fields[2] {
	case "ro":
		m.ReadOnly = true
	case "rw":
	default:
		return Mount{}, controlErr("mount", num, "mode", KindInvalidMode, "mode %s is not ro or rw", quote(fields[2]))
	}
	if err := parseMountOptions(num, fields[3], &m); err != nil {
		return Mount{}, err
	}
	return m, nil
}

func parseMountOptions(num int, field string, m *Mount) error {
	if field == "-" {
		return nil
	}
	bad := func(kind ErrorKind, format string, args ...any) error {
		return controlErr("mount", num, "options", kind, format, args...)
	}
	if field == "" {
		return bad(KindInvalidOption, `empty options (write "-" for none)`)
	}
	seen := map[string]bool{}
	for _, opt := range strings.Split(field, ",") {
		if seen[opt] {
			return bad(KindDuplicate, "option %s repeated", quote(opt))
		}
		seen[opt] = true
		switch opt {
		case "bind", "rbind":
			if m.Bind != BindDefault {
				return bad(KindInvalidOption, "bind and rbind exclude each other")
			}
			m.Bind = BindFlat
			if opt == "rbind" {
				m.Bind = BindRecursive
			}
		case "nosuid":
			m.NoSuid = true
		case "nodev":
			m.NoDev = true
		case "noexec":
			m.NoExec = true
		case "-":
			return bad(KindInvalidOption, `"-" means no options and stands alone`)
		default:
			return bad(KindInvalidOption, "unknown option %s (bind rbind nosuid nodev noexec, or - for none)", quote(opt))
		}
	}
	return nil
}
