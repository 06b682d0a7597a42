package ptyterm

import (
	"sync"
	"sync/atomic"
)

// PTY output is read into slabs: large buffers that the reader fills front
// to back and never writes again until every holder of a part of one has
// let it go. The clients' queues, the scrollback and the record hold
// parts of slabs instead of copies; a slab is reused once the last holder
// lets go of it, so a stream of output recycles a few slabs instead of
// allocating (and zeroing, faulting in and collecting) one per MiB.

const slabSize = 1 << 20

// slab is one buffer of output and the count of its holders.
type slab struct {
	mem  []byte // all of it; the slice itself is never changed
	used int    // how much the reader has filled (the reader's own)
	refs atomic.Int32
}

// freeSlabs keeps slabs no one holds, for the terminals of this process;
// the garbage collector takes those that stay unused.
var freeSlabs sync.Pool

// getSlab returns an empty slab with one holder, the caller.
func getSlab() *slab {
	s, _ := freeSlabs.Get().(*slab)
	if s == nil {
		s = &slab{mem: make([]byte, slabSize)}
	}
	s.used = 0
	s.refs.Store(1)
	return s
}

// poisonSlabs makes a slab's memory garbage as soon as its last holder
// lets go of it, so that a test catches any use after that. Only tests set
// it.
var poisonSlabs bool

func (s *slab) unref() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		if poisonSlabs {
			for i := range s.mem {
				s.mem[i] = 0xA5
			}
		}
		freeSlabs.Put(s)
	case n < 0:
		panic("ptyterm: slab let go of more often than held")
	}
}

// chunk is output that lies in a slab at offset off (s is nil for output
// that is not in one: nobody recycles it, and ref and unref do nothing).
type chunk struct {
	p   []byte
	s   *slab
	off int
}

// ref adds a holder of c's slab.
func (c chunk) ref() {
	if c.s != nil {
		c.s.refs.Add(1)
	}
}

// unref drops a holder of c's slab; the last one frees it for reuse.
func (c chunk) unref() {
	if c.s != nil {
		c.s.unref()
	}
}

// join returns a and b, which follows it directly in the same slab, as
// one chunk holding the slab once (a's hold); ok is false when b does not
// follow a.
func join(a, b chunk) (chunk, bool) {
	if a.s == nil || a.s != b.s || a.off+len(a.p) != b.off {
		return a, false
	}
	end := b.off + len(b.p)
	a.p = a.s.mem[a.off:end:end]
	return a, true
}

// release drops the holds of q's chunks and clears q.
func release(q []chunk) {
	for i := range q {
		q[i].unref()
		q[i] = chunk{}
	}
}
