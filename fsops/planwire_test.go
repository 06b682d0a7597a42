package fsops

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"

	"ctx/policy"
)

// wireOps are ops with every field of Op and FillEntry set somewhere.
func wireOps() []policy.Op {
	return []policy.Op{
		{Kind: policy.OpBind, Source: "/usr", Target: "/usr", ReadOnly: true, NoSuid: true, NoDev: true, Recursive: true, Why: "system directory"},
		{Kind: policy.OpBind, Source: "/opt/x", Target: "/opt/x", NoExec: true, Optional: true, IDMap: true, Why: "mount line 3"},
		{Kind: policy.OpTmpfs, Target: "/mnt", Mode: 0o755, Size: "16m", Fill: []policy.FillEntry{
			{Path: "tools", Kind: policy.FillDir},
			{Path: "tools/fs.read", Kind: policy.FillLink, Link: "/ctx/bin/ctx"},
			{Path: "SOP", Kind: policy.FillFile, Data: []byte("be careful\n\x00\xff"), Mode: 0o444},
		}},
		{Kind: policy.OpFile, Target: "/mnt/proc/identity", Data: []byte("agent=t\n"), Mode: 0o1644},
		{Kind: policy.OpPivotRoot},
	}
}

// Every field survives the wire, and the wire covers every field: a
// field added to Op or FillEntry fails here until the codec carries it.
func TestPlanWireRoundTrip(t *testing.T) {
	if n := reflect.TypeOf(policy.Op{}).NumField(); n != 15 {
		t.Fatalf("policy.Op has %d fields; the wire (planwire.go) carries 15: add the new one there and here", n)
	}
	if n := reflect.TypeOf(policy.FillEntry{}).NumField(); n != 5 {
		t.Fatalf("policy.FillEntry has %d fields; the wire carries 5", n)
	}
	plan := &policy.Plan{Iso: "uid", NewRoot: "/r", Ops: wireOps(), UID: 60101, Env: []string{"A=b"}, Argv: []string{"sh"},
		Access: []policy.AccessRule{{Path: "/workspace", Write: true}}}
	b, err := encodePlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, 'g') // what follows the plan stays for the reader
	rd := bufio.NewReader(bytes.NewReader(b))
	got, err := decodePlan(rd)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, plan) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, plan)
	}
	if c, err := rd.ReadByte(); err != nil || c != 'g' {
		t.Fatalf("after the plan: %q %v", c, err)
	}
	// A plan without ops.
	empty := &policy.Plan{Iso: "uid"}
	b, _ = encodePlan(empty)
	if got, err := decodePlan(bufio.NewReader(bytes.NewReader(b))); err != nil || !reflect.DeepEqual(got, empty) {
		t.Fatalf("empty plan: %+v %v", got, err)
	}
}

// Bad input is refused with an error, never a panic or a partial plan.
func TestPlanWireRefusals(t *testing.T) {
	good := encodeOps(wireOps())
	for name, b := range map[string][]byte{
		"truncated":          good[:len(good)-1],
		"trailing":           append(append([]byte{}, good...), 0),
		"count beyond input": {0xff, 0xff, 0x03},
		"length beyond":      {1, 200, 1},
		"unknown flag":       append([]byte{1, 0, 0, 0, 0, 0}, 0x80, 0x01, 0, 0, 0),
		"overlong varint":    {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"mode out of range":  {1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0},
	} {
		if ops, err := decodeOps(b); err == nil {
			t.Errorf("%s: decoded %+v", name, ops)
		}
	}
	// A JSON plan carrying its ops in the JSON part is refused.
	var w []byte
	js := []byte(`{"iso":"uid","ops":[{"kind":"pivotroot"}]}`)
	w = append(w, byte(len(js)))
	w = append(w, js...)
	w = append(w, 1, 0)
	if _, err := decodePlan(bufio.NewReader(bytes.NewReader(w))); err == nil {
		t.Error("ops in the JSON part were accepted")
	}
}

// FuzzPlanWireOps: any input decodes or is refused without panicking, and
// what decodes encodes back to the same ops.
func FuzzPlanWireOps(f *testing.F) {
	f.Add(encodeOps(wireOps()))
	f.Add(encodeOps(nil))
	f.Add([]byte{1, 4, 'b', 'i', 'n', 'd', 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := decodeOps(b)
		if err != nil {
			return
		}
		// A number may come in a longer form than encodeOps writes, so
		// the bytes may differ; the ops may not.
		back, err := decodeOps(encodeOps(ops))
		if err != nil || !reflect.DeepEqual(back, ops) {
			t.Fatalf("re-encoding changed the ops: %v", err)
		}
	})
}
