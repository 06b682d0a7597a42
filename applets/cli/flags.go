package cli

import (
	"fmt"
	"strings"
)

// FlagSet parses GNU-style long options interspersed with positional
// arguments (`ctx object install MANIFEST --tier system`), which the
// standard flag package cannot. "--" ends the options; what follows is kept
// apart as Command (for `ctx agent start NAME -- CMD ARGS`).
type FlagSet struct {
	specs   map[string]flagSpec
	Command []string // arguments after "--", nil when there was no "--"
	dashed  bool
}

type flagSpec struct {
	nargs int // 0 for a boolean
	set   func(vals []string) error
}

func NewFlags() *FlagSet { return &FlagSet{specs: map[string]flagSpec{}} }

// String registers --name VALUE (also --name=VALUE). Given twice, the last wins.
func (f *FlagSet) String(name string, p *string) {
	f.specs[name] = flagSpec{1, func(v []string) error { *p = v[0]; return nil }}
}

// Bool registers --name.
func (f *FlagSet) Bool(name string, p *bool) {
	f.specs[name] = flagSpec{0, func([]string) error { *p = true; return nil }}
}

// List registers a repeatable --name VALUE.
func (f *FlagSet) List(name string, p *[]string) {
	f.specs[name] = flagSpec{1, func(v []string) error { *p = append(*p, v[0]); return nil }}
}

// Tuple registers a repeatable --name V1 ... Vn taking n values.
func (f *FlagSet) Tuple(name string, n int, p *[][]string) {
	f.specs[name] = flagSpec{n, func(v []string) error { *p = append(*p, append([]string(nil), v...)); return nil }}
}

// Parse returns the positional arguments, or an error naming the bad option.
func (f *FlagSet) Parse(args []string) ([]string, error) {
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			f.dashed = true
			f.Command = append([]string{}, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		var inline *string
		if k, v, ok := strings.Cut(name, "="); ok {
			name, inline = k, &v
		}
		spec, ok := f.specs[name]
		if !ok {
			return nil, fmt.Errorf("unknown option %s", a)
		}
		var vals []string
		switch {
		case spec.nargs == 0 && inline != nil:
			return nil, fmt.Errorf("option --%s takes no value", name)
		case spec.nargs == 1 && inline != nil:
			vals = []string{*inline}
		case spec.nargs > 0 && inline != nil:
			return nil, fmt.Errorf("option --%s takes %d values", name, spec.nargs)
		default:
			if i+spec.nargs >= len(args) {
				return nil, fmt.Errorf("option --%s needs %d value(s)", name, spec.nargs)
			}
			vals = args[i+1 : i+1+spec.nargs]
			i += spec.nargs
		}
		if err := spec.set(vals); err != nil {
			return nil, fmt.Errorf("option --%s: %v", name, err)
		}
	}
	return pos, nil
}

// ParseArgs parses args with f and turns an error into a usage error.
// It reports ok=false together with the exit code to return.
func ParseArgs(e *Env, f *FlagSet, args []string, minPos, maxPos int) ([]string, int, bool) {
	pos, err := f.Parse(args)
	if err != nil {
		return nil, UsageError(e, "%v", err), false
	}
	if len(pos) < minPos {
		return nil, UsageError(e, "missing argument"), false
	}
	if maxPos >= 0 && len(pos) > maxPos {
		return nil, UsageError(e, "unexpected argument %q", pos[maxPos]), false
	}
	return pos, 0, true
}
