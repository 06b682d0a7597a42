package proc

import "bytes"

// Capped keeps the first Limit bytes written to it and counts the rest.
// It is where a child's output goes (shell.exec, a hook, a queue job, a
// tool served over MCP): the child is never blocked by a full buffer, and
// ctx never holds more than Limit bytes of it. It does not embed a
// bytes.Buffer: an embedded ReadFrom would let io.Copy bypass the limit.
//
// A write past the limit keeps what fits and reports success, so the copy
// goes on draining the child, unless StopOver is set: then the write
// fails, the copy stops, and the child's next write gets EPIPE (a queue
// job whose result is too large is failed, not truncated).
type Capped struct {
	Limit    int
	StopOver bool
	// OnLine, when set, sees each complete line that was kept, as it
	// arrives (without its newline; valid only during the call).
	OnLine func([]byte)

	buf       bytes.Buffer
	dropped   int64
	lineStart int
}

// errOver is the error of a write past the limit with StopOver.
type errOver struct{}

func (errOver) Error() string { return "output limit reached" }

func (b *Capped) Write(p []byte) (int, error) {
	room := max(0, min(b.Limit-b.buf.Len(), len(p)))
	b.buf.Write(p[:room])
	b.dropped += int64(len(p) - room)
	if b.OnLine != nil {
		for data := b.buf.Bytes(); ; {
			i := bytes.IndexByte(data[b.lineStart:], '\n')
			if i < 0 {
				break
			}
			b.OnLine(data[b.lineStart : b.lineStart+i])
			b.lineStart += i + 1
		}
	}
	if room < len(p) && b.StopOver {
		return room, errOver{}
	}
	return len(p), nil
}

// Bytes returns the bytes kept.
func (b *Capped) Bytes() []byte { return b.buf.Bytes() }

// Dropped is the number of bytes written past the limit.
func (b *Capped) Dropped() int64 { return b.dropped }

// Truncated reports whether any byte was dropped.
func (b *Capped) Truncated() bool { return b.dropped > 0 }
