package sandbox

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"ctx/policy/sandboxplan"
)

// How a plan travels to the sandbox's init (Sandbox.SendPlan): in a
// compact binary form, two parts each preceded by its length (uvarint):
// everything but the ops (planwire_plan.go), then the ops. A plan is
// nearly all ops; encoding/json decoding it in the init's fresh process
// (building its reflection caches first) and encoding it in the run host
// were both on the start's critical path; the binary form is a plain loop
// over the bytes. `ctx agent start --plan` still prints the
// plan as JSON: this is only the wire.
//
// An op is: kind, source, target, size, why (strings); flags (uvarint:
// the booleans, in opFlagBits order); mode (uvarint); data (bytes); the
// fill entries (uvarint count, then each: path, kind, link (strings),
// data (bytes), mode (uvarint)). A string or bytes is a uvarint length
// and that many bytes.

// maxPlanPart bounds each part of the wire plan, as the JSON plan was.
const maxPlanPart = 64 << 20

// opFlagBits are Op's booleans, each its bit of the flags field.
var opFlagBits = []func(*sandboxplan.Op) *bool{
	func(o *sandboxplan.Op) *bool { return &o.ReadOnly },
	func(o *sandboxplan.Op) *bool { return &o.NoSuid },
	func(o *sandboxplan.Op) *bool { return &o.NoDev },
	func(o *sandboxplan.Op) *bool { return &o.NoExec },
	func(o *sandboxplan.Op) *bool { return &o.Recursive },
	func(o *sandboxplan.Op) *bool { return &o.Optional },
	func(o *sandboxplan.Op) *bool { return &o.IDMap },
	func(o *sandboxplan.Op) *bool { return &o.Template },
}

// encodePlan is the wire form of plan.
func encodePlan(plan *sandboxplan.Plan) ([]byte, error) {
	rest := encodePlanRest(plan)
	ops := EncodeOps(plan.Ops)
	out := make([]byte, 0, len(rest)+len(ops)+2*binary.MaxVarintLen64)
	out = binary.AppendUvarint(out, uint64(len(rest)))
	out = append(out, rest...)
	out = binary.AppendUvarint(out, uint64(len(ops)))
	return append(out, ops...), nil
}

// decodePlan reads one wire plan from r.
func decodePlan(r *bufio.Reader) (*sandboxplan.Plan, error) {
	rest, err := readPart(r, "the plan")
	if err != nil {
		return nil, err
	}
	plan, err := decodePlanRest(rest)
	if err != nil {
		return nil, fmt.Errorf("the plan: %w", err)
	}
	bin, err := readPart(r, "the plan's ops")
	if err != nil {
		return nil, err
	}
	if plan.Ops, err = decodeOps(bin); err != nil {
		return nil, fmt.Errorf("the plan's ops: %w", err)
	}
	return plan, nil
}

// readPart reads one length-prefixed part.
func readPart(r *bufio.Reader, what string) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if n > maxPlanPart {
		return nil, fmt.Errorf("%s: %d bytes (limit %d)", what, n, maxPlanPart)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%s: %w", what, io.ErrUnexpectedEOF)
	}
	return b, nil
}

// wireEncoder writes the binary form (a plan or its ops).
type wireEncoder struct{ b []byte }

func (w *wireEncoder) num(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *wireEncoder) bytes(d []byte) { w.num(uint64(len(d))); w.b = append(w.b, d...) }

func (w *wireEncoder) str(s string) { w.num(uint64(len(s))); w.b = append(w.b, s...) }

func (w *wireEncoder) strs(l []string) {
	w.num(uint64(len(l)))
	for _, s := range l {
		w.str(s)
	}
}

// EncodeOps is the binary form of ops.
func EncodeOps(ops []sandboxplan.Op) []byte {
	w := &wireEncoder{}
	w.num(uint64(len(ops)))
	for i := range ops {
		op := &ops[i]
		for _, s := range []string{string(op.Kind), op.Source, op.Target, op.Size, op.Why} {
			w.str(s)
		}
		w.num(flagsOf(op, opFlagBits))
		w.num(uint64(op.Mode))
		w.bytes(op.Data)
		w.num(uint64(len(op.Fill)))
		for _, e := range op.Fill {
			w.str(e.Path)
			w.str(e.Kind)
			w.str(e.Link)
			w.bytes(e.Data)
			w.num(uint64(e.Mode))
		}
	}
	return w.b
}

// wireDecoder reads the binary form (a plan or its ops); the first
// error sticks.
type wireDecoder struct {
	b   []byte
	err error
}

func (d *wireDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("truncated or overlong number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items each at least min bytes long: one that
// the remaining input cannot hold is refused before anything is made.
func (d *wireDecoder) count(min int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/min) {
		d.err = fmt.Errorf("%d items in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *wireDecoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("a field of %d bytes in %d", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *wireDecoder) str() string { return string(d.raw()) }

func (d *wireDecoder) bytes() []byte {
	v := d.raw()
	if len(v) == 0 {
		return nil
	}
	return append([]byte(nil), v...)
}

func (d *wireDecoder) u32() uint32 {
	v := d.uvarint()
	if d.err == nil && v > 1<<32-1 {
		d.err = fmt.Errorf("%d out of range", v)
	}
	return uint32(v)
}

// decodeOps reads ops from their binary form, all of it.
func decodeOps(b []byte) ([]sandboxplan.Op, error) {
	d := &wireDecoder{b: b}
	// The least an op takes: five empty strings, flags, mode, empty
	// data and no fill, a byte each.
	n := d.count(9)
	var ops []sandboxplan.Op
	if n > 0 {
		ops = make([]sandboxplan.Op, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		op := &ops[i]
		op.Kind = sandboxplan.OpKind(d.str())
		op.Source = d.str()
		op.Target = d.str()
		op.Size = d.str()
		op.Why = d.str()
		readFlags(d, op, opFlagBits, "op", i)
		op.Mode = d.u32()
		op.Data = d.bytes()
		// A fill entry takes at least five bytes.
		if m := d.count(5); m > 0 {
			op.Fill = make([]sandboxplan.FillEntry, m)
			for j := range op.Fill {
				e := &op.Fill[j]
				e.Path = d.str()
				e.Kind = d.str()
				e.Link = d.str()
				e.Data = d.bytes()
				e.Mode = d.u32()
			}
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the last op", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return ops, nil
}
