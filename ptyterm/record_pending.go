package ptyterm

// pendingOutput is output queued for the record and not yet written: the
// chunks as they were handed over, in order (from parts[head]), n bytes
// in all, each holding its slab.
type pendingOutput struct {
	parts []chunk
	head  int
	n     int
	done  []chunk             // used up by next, released by release
	line  [maxOutputData]byte // a line that spans parts is gathered here
}

func (o *pendingOutput) add(c chunk) {
	if len(c.p) == 0 {
		c.unref()
		return
	}
	if o.head > 0 && o.head >= len(o.parts)/2 {
		// Move what is left to the front, so that a stream that always
		// leaves a remainder does not grow the array forever.
		k := copy(o.parts, o.parts[o.head:])
		clear(o.parts[k:])
		o.parts, o.head = o.parts[:k], 0
	}
	o.parts = append(o.parts, c)
	o.n += len(c.p)
}

// next removes the next k bytes (0 < k <= o.n) and returns them: in place
// when they lie in one part, else gathered into o.line. They stay valid
// until release.
func (o *pendingOutput) next(k int) []byte {
	o.n -= k
	if p := o.parts[o.head].p; len(p) >= k {
		o.parts[o.head].p = p[k:]
		if len(p) == k {
			o.usedUp()
		}
		return p[:k:k]
	}
	buf := o.line[:0]
	for len(buf) < k {
		p := o.parts[o.head].p
		m := min(len(p), k-len(buf))
		buf = append(buf, p[:m]...)
		if m == len(p) {
			o.usedUp()
		} else {
			o.parts[o.head].p = p[m:]
		}
	}
	return buf
}

// usedUp moves the first part, all of it taken, to done.
func (o *pendingOutput) usedUp() {
	o.done = append(o.done, o.parts[o.head])
	o.parts[o.head] = chunk{}
	if o.head++; o.head == len(o.parts) {
		o.parts, o.head = o.parts[:0], 0
	}
}

// release lets go of the parts that next has used up.
func (o *pendingOutput) release() {
	release(o.done)
	o.done = o.done[:0]
}

// drop lets go of everything held.
func (o *pendingOutput) drop() {
	o.release()
	release(o.parts[o.head:])
	o.parts, o.head, o.n = o.parts[:0], 0, 0
}
