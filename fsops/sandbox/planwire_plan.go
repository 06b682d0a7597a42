package sandbox

import (
	"fmt"
	"sort"
	"strconv"

	"ctx/policy/sandboxplan"
)

// The rest of a plan (all but its ops) in the same binary form as the
// ops (planwire.go): encoding/json decoding these few hundred bytes in
// the init's fresh process had to build its reflection caches first, on
// the start's critical path.
//
// In order: iso (string); the namespaces (uvarint, nsFlagBits); new root
// (string); the plan's booleans (uvarint, planFlagBits); uid, gid, outer
// uid, outer gid (uvarint each); groups (count, uvarint each); hostname,
// cwd (strings); env, argv (count, strings); exe, worker (strings); the
// access rules (count, each: path (string), flags (uvarint,
// accessFlagBits)); the exec paths (count, strings); the idmap (uvarint
// 0, or 1 then disk uid and disk gid); the limits (count, each: name
// (string), value (uvarint)), by name; the egress (uvarint 0, or 1 then
// proxy, dns (strings), forward (count, strings), connect port (uvarint)).

var nsFlagBits = []func(*sandboxplan.Namespaces) *bool{
	func(n *sandboxplan.Namespaces) *bool { return &n.User },
	func(n *sandboxplan.Namespaces) *bool { return &n.Mount },
	func(n *sandboxplan.Namespaces) *bool { return &n.PID },
	func(n *sandboxplan.Namespaces) *bool { return &n.UTS },
	func(n *sandboxplan.Namespaces) *bool { return &n.IPC },
	func(n *sandboxplan.Namespaces) *bool { return &n.Net },
}

var planFlagBits = []func(*sandboxplan.Plan) *bool{
	func(p *sandboxplan.Plan) *bool { return &p.RootFS },
	func(p *sandboxplan.Plan) *bool { return &p.ExecAll },
	func(p *sandboxplan.Plan) *bool { return &p.DenyTCP },
	func(p *sandboxplan.Plan) *bool { return &p.NoNetwork },
	func(p *sandboxplan.Plan) *bool { return &p.UnixGate },
}

var accessFlagBits = []func(*sandboxplan.AccessRule) *bool{
	func(a *sandboxplan.AccessRule) *bool { return &a.Write },
	func(a *sandboxplan.AccessRule) *bool { return &a.Exec },
	func(a *sandboxplan.AccessRule) *bool { return &a.Dev },
	func(a *sandboxplan.AccessRule) *bool { return &a.Optional },
	func(a *sandboxplan.AccessRule) *bool { return &a.Connect },
	func(a *sandboxplan.AccessRule) *bool { return &a.KeepDirs },
}

// flagsOf packs the booleans bits names of v.
func flagsOf[T any](v *T, bits []func(*T) *bool) uint64 {
	var f uint64
	for i, b := range bits {
		if *b(v) {
			f |= 1 << i
		}
	}
	return f
}

// encodePlanRest is the binary form of everything in plan but its ops.
func encodePlanRest(plan *sandboxplan.Plan) []byte {
	w := &wireEncoder{}
	w.str(plan.Iso)
	w.num(flagsOf(&plan.Namespaces, nsFlagBits))
	w.str(plan.NewRoot)
	w.num(flagsOf(plan, planFlagBits))
	for _, id := range []uint32{plan.UID, plan.GID, plan.OuterUID, plan.OuterGID} {
		w.num(uint64(id))
	}
	w.num(uint64(len(plan.Groups)))
	for _, g := range plan.Groups {
		w.num(uint64(g))
	}
	w.str(plan.Hostname)
	w.str(plan.Cwd)
	w.strs(plan.Env)
	w.strs(plan.Argv)
	w.str(plan.Exe)
	w.str(plan.Worker)
	w.num(uint64(len(plan.Access)))
	for i := range plan.Access {
		w.str(plan.Access[i].Path)
		w.num(flagsOf(&plan.Access[i], accessFlagBits))
	}
	w.strs(plan.ExecPaths)
	if plan.IDMap == nil {
		w.num(0)
	} else {
		w.num(1)
		w.num(uint64(plan.IDMap.DiskUID))
		w.num(uint64(plan.IDMap.DiskGID))
	}
	names := make([]string, 0, len(plan.Limits))
	for n := range plan.Limits {
		names = append(names, n)
	}
	sort.Strings(names)
	w.num(uint64(len(names)))
	for _, n := range names {
		w.str(n)
		w.num(plan.Limits[n])
	}
	if e := plan.Egress; e == nil {
		w.num(0)
	} else {
		w.num(1)
		w.str(e.Proxy)
		w.str(e.DNS)
		w.strs(e.Forward)
		w.num(uint64(e.ConnectPort))
	}
	return w.b
}

// readFlags reads a flags field into v's booleans, refusing unknown bits;
// what (with index, when not negative) names the field in the error,
// formatted only then: the ops are read on the start's critical path.
func readFlags[T any](d *wireDecoder, v *T, bits []func(*T) *bool, what string, index int) {
	f := d.uvarint()
	if d.err == nil && f>>len(bits) != 0 {
		if index >= 0 {
			what += " " + strconv.Itoa(index)
		}
		d.err = fmt.Errorf("%s: unknown flags %#x", what, f)
	}
	for i, b := range bits {
		*b(v) = f&(1<<i) != 0
	}
}

// strs reads a count of strings (nil for none).
func (d *wireDecoder) strs() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = d.str()
	}
	return l
}

// decodePlanRest reads everything but the ops from its binary form, all
// of it.
func decodePlanRest(b []byte) (*sandboxplan.Plan, error) {
	d := &wireDecoder{b: b}
	p := &sandboxplan.Plan{}
	p.Iso = d.str()
	readFlags(d, &p.Namespaces, nsFlagBits, "namespaces", -1)
	p.NewRoot = d.str()
	readFlags(d, p, planFlagBits, "plan", -1)
	for _, id := range []*uint32{&p.UID, &p.GID, &p.OuterUID, &p.OuterGID} {
		*id = d.u32()
	}
	if n := d.count(1); n > 0 {
		p.Groups = make([]uint32, n)
		for i := range p.Groups {
			p.Groups[i] = d.u32()
		}
	}
	p.Hostname = d.str()
	p.Cwd = d.str()
	p.Env = d.strs()
	p.Argv = d.strs()
	p.Exe = d.str()
	p.Worker = d.str()
	if n := d.count(2); n > 0 {
		p.Access = make([]sandboxplan.AccessRule, n)
		for i := range p.Access {
			p.Access[i].Path = d.str()
			readFlags(d, &p.Access[i], accessFlagBits, "access rule", i)
		}
	}
	p.ExecPaths = d.strs()
	switch d.uvarint() {
	case 0:
	case 1:
		p.IDMap = &sandboxplan.IDMap{DiskUID: d.u32(), DiskGID: d.u32()}
	default:
		if d.err == nil {
			d.err = fmt.Errorf("idmap: neither absent nor present")
		}
	}
	if n := d.count(2); n > 0 {
		p.Limits = make(map[string]uint64, n)
		for i := 0; i < n && d.err == nil; i++ {
			name := d.str()
			p.Limits[name] = d.uvarint()
		}
	}
	switch d.uvarint() {
	case 0:
	case 1:
		p.Egress = &sandboxplan.Egress{Proxy: d.str(), DNS: d.str(), Forward: d.strs()}
		if port := d.uvarint(); port <= 0xffff {
			p.Egress.ConnectPort = uint16(port)
		} else if d.err == nil {
			d.err = fmt.Errorf("egress: connect port %d", port)
		}
	default:
		if d.err == nil {
			d.err = fmt.Errorf("egress: neither absent nor present")
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the plan", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return p, nil
}
