package netproxy

import (
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// How a relay moves bytes: read into a large buffer, write it out. It
// measured cheaper per byte than splice(2) through a pipe (what io.Copy
// does from one TCP socket to another; a splice loop with a 1 MiB pipe
// of our own did no better), which hands the destination the pieces the
// source's segments arrived in, so the relay sends more, smaller
// segments (ctx man ctx.internals, PERFORMANCE; BENCH.md).

// relayBufSize is the buffer one direction reads into.
const relayBufSize = 1 << 20

// relayBufs holds the buffers of directions whose source has no bytes
// ready: an idle relay (a keep-alive connection) holds none.
var relayBufs = sync.Pool{New: func() any {
	b := make([]byte, relayBufSize)
	return &b
}}

// bigBufSlots bounds the large buffers held at once in this process: an
// agent that keeps many connections streaming (within its budgets, or
// with none) must not make the run host hold a mebibyte for each. A
// direction that finds no slot reads into a small buffer of its own.
var bigBufSlots = make(chan struct{}, 64)

// smallBufSize is that buffer's size (io.Copy's).
const smallBufSize = 32 << 10

// reader reads one direction's source into a pooled buffer it holds only
// while the source has bytes ready.
type reader struct {
	src io.Reader
	raw syscall.RawConn // nil: src is read with Read
	buf *[]byte
	big bool   // buf is from relayBufs and holds a slot of bigBufSlots
	own []byte // the buffer when raw is nil, or when no slot was free
}

func newReader(src io.Reader) *reader {
	r := &reader{src: src}
	if sc, ok := src.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			r.raw = raw
		}
	}
	return r
}

// read returns up to max bytes of src, valid until the next read;
// io.EOF at its end.
func (r *reader) read(max int64) ([]byte, error) {
	if r.raw == nil {
		// Not a socket (nothing to wait on without a buffer): one
		// of its own, as io.Copy's plain loop would use.
		if r.own == nil {
			r.own = make([]byte, smallBufSize)
		}
		n, err := r.src.Read(r.own[:min(int64(len(r.own)), max)])
		return r.own[:n], err
	}
	var b []byte
	var rerr error
	err := r.raw.Read(func(fd uintptr) bool {
		r.take()
		b = (*r.buf)[:min(int64(len(*r.buf)), max)]
		n, err := unix.Read(int(fd), b)
		for err == unix.EINTR {
			n, err = unix.Read(int(fd), b)
		}
		if err == unix.EAGAIN {
			// Nothing ready: give the buffer back while the
			// netpoller waits for the socket.
			r.release()
			return false
		}
		switch {
		case err != nil:
			b, rerr = nil, os.NewSyscallError("read", err)
		case n == 0:
			b, rerr = nil, io.EOF
		default:
			b = b[:n]
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return b, rerr
}

func (r *reader) take() {
	if r.buf != nil {
		return
	}
	select {
	case bigBufSlots <- struct{}{}:
		r.buf, r.big = relayBufs.Get().(*[]byte), true
	default:
		if r.own == nil {
			r.own = make([]byte, smallBufSize)
		}
		r.buf = &r.own
	}
}

// release gives the buffer back; the reader takes another if read again.
func (r *reader) release() {
	if r.big {
		relayBufs.Put(r.buf)
		<-bigBufSlots
	}
	r.buf, r.big = nil, false
}

// copyChunk copies up to limit bytes from r to dst, counting each write
// with count as it completes; eof is true when r ended first.
func copyChunk(dst io.Writer, r *reader, limit int64, count func(int64)) (written int64, eof bool, err error) {
	for written < limit {
		b, rerr := r.read(limit - written)
		if len(b) > 0 {
			w, werr := dst.Write(b)
			written += int64(w)
			count(int64(w))
			if werr != nil {
				return written, false, werr
			}
		}
		if rerr == io.EOF {
			return written, true, nil
		}
		if rerr != nil {
			return written, false, rerr
		}
	}
	return written, false, nil
}
