package sandbox

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"

	"ctx/policy/sandboxplan"
)

// wireOps are ops with every field of Op and FillEntry set somewhere.
func wireOps() []sandboxplan.Op {
	return []sandboxplan.Op{
		{Kind: sandboxplan.OpBind, Source: "/usr", Target: "/usr", ReadOnly: true, NoSuid: true, NoDev: true, Recursive: true, Why: "system directory"},
		{Kind: sandboxplan.OpBind, Source: "/opt/x", Target: "/opt/x", NoExec: true, Optional: true, IDMap: true, Why: "mount line 3"},
		{Kind: sandboxplan.OpTmpfs, Target: "/mnt", Mode: 0o755, Size: "16m", Fill: []sandboxplan.FillEntry{
			{Path: "tools", Kind: sandboxplan.FillDir},
			{Path: "tools/fs.read", Kind: sandboxplan.FillLink, Link: "/ctx/bin/ctx"},
			{Path: "SOP", Kind: sandboxplan.FillFile, Data: []byte("be careful\n\x00\xff"), Mode: 0o444},
		}},
		{Kind: sandboxplan.OpFile, Target: "/mnt/proc/identity", Data: []byte("agent=t\n"), Mode: 0o1644, Template: true},
		{Kind: sandboxplan.OpPivotRoot},
	}
}

// Every field survives the wire, and the wire covers every field: a
// field added to Op or FillEntry fails here until the codec carries it.
func TestPlanWireRoundTrip(t *testing.T) {
	for _, c := range []struct {
		v any
		n int
	}{{sandboxplan.Op{}, 16}, {sandboxplan.FillEntry{}, 5}, {sandboxplan.Plan{}, 25}, {sandboxplan.Egress{}, 4}, {sandboxplan.AccessRule{}, 7}, {sandboxplan.Namespaces{}, 6}, {sandboxplan.IDMap{}, 2}} {
		if got := reflect.TypeOf(c.v).NumField(); got != c.n {
			t.Fatalf("%T has %d fields; the wire (planwire.go, planwire_plan.go) carries %d: add the new one there and here", c.v, got, c.n)
		}
	}
	// Every field set, each boolean on somewhere and off somewhere.
	plan := &sandboxplan.Plan{Iso: "uid", Namespaces: sandboxplan.Namespaces{User: true, PID: true, Net: true}, NewRoot: "/r",
		RootFS: true, Ops: wireOps(), UID: 60101, GID: 60102, Groups: []uint32{7, 1 << 31}, OuterUID: 1, OuterGID: 1<<32 - 1,
		Hostname: "ctx-coder", Cwd: "/workspace", Env: []string{"A=b", ""}, Argv: []string{"sh", "-c", "x"}, Exe: "/ctx/bin/ctx",
		Worker: "/ctx/bin/ctx", Access: []sandboxplan.AccessRule{{Path: "/workspace", Write: true, Dev: true, Connect: true}, {Path: "/", Exec: true, Optional: true, KeepDirs: true}},
		ExecAll: true, ExecPaths: []string{"/ctx/bin"}, DenyTCP: true, IDMap: &sandboxplan.IDMap{DiskUID: 5, DiskGID: 6},
		Limits: map[string]uint64{"nofile": 1024, "cpu": 1<<64 - 1}, NoNetwork: true, UnixGate: true,
		Egress: &sandboxplan.Egress{Proxy: "127.0.0.1:3128", DNS: "127.0.0.53:53", Forward: []string{"0.0.0.0:443", "127.0.0.1:5173"}, ConnectPort: 40001}}
	plan2 := &sandboxplan.Plan{Iso: "userns", Namespaces: sandboxplan.Namespaces{Mount: true, UTS: true, IPC: true}}
	for _, p := range []*sandboxplan.Plan{plan, plan2} {
		b, err := encodePlan(p)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, 'g') // what follows the plan stays for the reader
		rd := bufio.NewReader(bytes.NewReader(b))
		got, err := decodePlan(rd)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, p)
		}
		if c, err := rd.ReadByte(); err != nil || c != 'g' {
			t.Fatalf("after the plan: %q %v", c, err)
		}
	}
	// A plan without ops.
	empty := &sandboxplan.Plan{Iso: "uid"}
	b, _ := encodePlan(empty)
	if got, err := decodePlan(bufio.NewReader(bytes.NewReader(b))); err != nil || !reflect.DeepEqual(got, empty) {
		t.Fatalf("empty plan: %+v %v", got, err)
	}
}

// Bad input is refused with an error, never a panic or a partial plan.
func TestPlanWireRefusals(t *testing.T) {
	good := EncodeOps(wireOps())
	for name, b := range map[string][]byte{
		"truncated":          good[:len(good)-1],
		"trailing":           append(append([]byte{}, good...), 0),
		"count beyond input": {0xff, 0xff, 0x03},
		"length beyond":      {1, 200, 1},
		"unknown flag":       append([]byte{1, 0, 0, 0, 0, 0}, 0x80, 0x02, 0, 0, 0),
		"overlong varint":    {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"mode out of range":  {1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0},
	} {
		if ops, err := decodeOps(b); err == nil {
			t.Errorf("%s: decoded %+v", name, ops)
		}
	}
	// The rest of the plan: truncated, trailing, unknown flags, an idmap
	// neither absent nor present, a count beyond the input.
	rest := encodePlanRest(&sandboxplan.Plan{Iso: "uid", Argv: []string{"sh"}})
	for name, b := range map[string][]byte{
		"truncated":       rest[:len(rest)-1],
		"trailing":        append(append([]byte{}, rest...), 0),
		"namespace flags": append([]byte{0, 0x40}, rest[2:]...),
		"plan flags":      append([]byte{0, 0, 0, 0x10}, rest[4:]...),
		"idmap tag":       append(append([]byte{}, rest[:len(rest)-2]...), 2, 0),
		"groups beyond":   append(append([]byte{}, rest[:8]...), 0xff, 0x7f),
	} {
		if p, err := decodePlanRest(b); err == nil {
			t.Errorf("%s: decoded %+v", name, p)
		}
	}
}

// FuzzPlanWireOps: any input decodes or is refused without panicking, and
// what decodes encodes back to the same ops.
func FuzzPlanWireOps(f *testing.F) {
	f.Add(EncodeOps(wireOps()))
	f.Add(EncodeOps(nil))
	f.Add([]byte{1, 4, 'b', 'i', 'n', 'd', 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := decodeOps(b)
		if err != nil {
			return
		}
		// A number may come in a longer form than EncodeOps writes, so
		// the bytes may differ; the ops may not.
		back, err := decodeOps(EncodeOps(ops))
		if err != nil || !reflect.DeepEqual(back, ops) {
			t.Fatalf("re-encoding changed the ops: %v", err)
		}
	})
}

// FuzzPlanWireRest: any input decodes or is refused without panicking,
// and what decodes encodes back to the same plan.
func FuzzPlanWireRest(f *testing.F) {
	f.Add(encodePlanRest(&sandboxplan.Plan{Iso: "uid", NewRoot: "/r", Argv: []string{"sh"}, Access: []sandboxplan.AccessRule{{Path: "/", Exec: true}},
		IDMap: &sandboxplan.IDMap{DiskUID: 1}, Limits: map[string]uint64{"nofile": 8}}))
	f.Add(encodePlanRest(&sandboxplan.Plan{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePlanRest(b)
		if err != nil {
			return
		}
		back, err := decodePlanRest(encodePlanRest(p))
		if err != nil || !reflect.DeepEqual(back, p) {
			t.Fatalf("re-encoding changed the plan: %v", err)
		}
	})
}
