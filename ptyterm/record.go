package ptyterm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"ctx/fsops"

	"golang.org/x/sys/unix"
)

// The terminal record is a JSONL file (session/S/terminal/<id>/events.jsonl)
// of one event per line:
//
//	{"seq":1,"ts":"2026-06-22T12:00:00.123Z","type":"process.start","pid":42,"rows":24,"cols":80}
//	{"seq":2,"ts":"...","type":"pty.output","data_b64":"aGVsbG8NCg=="}
//	{"seq":3,"ts":"...","type":"terminal.attach","uid":1000,"pid":77}
//	{"seq":4,"ts":"...","type":"pty.resize","rows":40,"cols":120}
//	{"seq":5,"ts":"...","type":"terminal.detach","mode":"attach","uid":1000,"pid":77,"reason":"eof"}
//	{"seq":6,"ts":"...","type":"process.exit","exit_code":0}
//
// A record may be held to a number of bytes per run (Config.RecordLimit):
// the line that would pass it is not written, and record.stopped is
// written instead, as the run's last line:
//
//	{"seq":7,"ts":"...","type":"record.stopped","reason":"record_bytes","limit":65536}
//
// seq increases by one per line and continues from the last seq already in
// the file, so a resumed session keeps one sequence. Every line is shorter
// than maxEventLine, and every O_APPEND write(2) holds whole lines only
// (bulk output is several lines per write), so no other appender can ever
// cut a line.

// Event types written to the terminal record.
const (
	EventStart    = "process.start"
	EventOutput   = "pty.output"
	EventResize   = "pty.resize"
	EventExit     = "process.exit"
	EventWatch    = "terminal.watch"
	EventAttach   = "terminal.attach"
	EventDetach   = "terminal.detach"
	EventRefused  = "terminal.refused"
	EventStopped  = "record.stopped"
	maxEventLine  = 4000
	maxOutputData = 2880 // raw bytes per pty.output: 3840 base64 characters
	// outputLinger is how long the recorder waits for more output before it
	// writes a partial chunk: bulk output fills whole chunks, while typing
	// echoes coalesce into fewer lines; the live clients never wait for it.
	outputLinger = 10 * time.Millisecond
	// recordBatch is how long streaming output gathers between writes,
	// and maxRecordBatch how much one write may take.
	recordBatch    = 5 * time.Millisecond
	maxRecordBatch = 1 << 20
	// maxReplayLine bounds one line read back by Replay and ReadExit.
	maxReplayLine = 64 << 10
)

// StopReasonLimit is the reason of the record.stopped event written when
// the record reached Config.RecordLimit: the run's record_bytes budget.
const StopReasonLimit = "record_bytes"

// Event is one line of the terminal record. Fields that do not apply to a
// type are omitted.
type Event struct {
	Seq      uint64 `json:"seq"`
	TS       string `json:"ts"`
	Type     string `json:"type"`
	DataB64  string `json:"data_b64,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Terminal string `json:"terminal,omitempty"`
	Mode     string `json:"mode,omitempty"`
	UID      *int   `json:"uid,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Rows     uint16 `json:"rows,omitempty"`
	Cols     uint16 `json:"cols,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Limit    int64  `json:"limit,omitempty"`
}

// recorder appends events to the terminal record. Output is handed to a
// goroutine that cuts it into pty.output lines, so a slow disk delays the
// record, never the live clients, until the channel's bound is reached.
// With no file it discards everything.
type recorder struct {
	path string
	log  func(error)

	created bool // the record did not exist before this terminal

	// limit is how many bytes this run may append (0: no bound); onLimit
	// is called once when a line would pass it.
	limit   int64
	onLimit func()
	// stopped is set once the limit stopped the record: Output then drops
	// output at once, without queueing it.
	stopped atomic.Bool

	mu      sync.Mutex
	f       *os.File
	seq     uint64
	written int64 // bytes this run appended
	failed  bool
	outq    chan chunk    // nil without a record; set once at open
	flushed chan struct{} // closed when cutOutput has written everything
}

// openRecorder opens (creating 0644) the record at path for appending and
// finds the last seq in it. A symlink or non-regular file is refused.
// limit bounds the bytes this run appends (0 or less: no bound); onLimit,
// if set, is called once when the bound stops the record.
func openRecorder(path string, limit int64, onLimit func(), log func(error)) (*recorder, error) {
	r := &recorder{path: path, log: log, limit: max(limit, 0), onLimit: onLimit}
	if path != "" {
		const flags = unix.O_RDWR | unix.O_APPEND | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
		fd, err := unix.Open(path, flags|unix.O_CREAT|unix.O_EXCL, 0o644)
		r.created = err == nil
		if err == unix.EEXIST {
			fd, err = unix.Open(path, flags, 0)
		}
		if err != nil {
			if err == unix.ELOOP {
				err = fsops.ErrSymlink
			}
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		f := os.NewFile(uintptr(fd), path)
		st, err := f.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = &os.PathError{Op: "open", Path: path, Err: fsops.ErrNotRegular}
		}
		if err == nil {
			r.seq, err = lastSeq(f, st.Size())
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		r.f = f
	}
	if r.f != nil {
		r.outq, r.flushed = make(chan chunk, 256), make(chan struct{})
		go r.cutOutput()
	}
	return r, nil
}

// lastSeq returns the highest seq in the last complete lines of f: it reads
// the tail, and the whole file only when the tail holds no event.
func lastSeq(f *os.File, size int64) (uint64, error) {
	const tail = 16 << 10
	off := max(size-tail, 0)
	for {
		buf := make([]byte, size-off)
		if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
			return 0, &os.PathError{Op: "read", Path: f.Name(), Err: err}
		}
		var last uint64
		found := false
		for _, line := range bytes.Split(buf, []byte("\n")) {
			var ev struct {
				Seq *uint64 `json:"seq"`
			}
			if json.Unmarshal(line, &ev) == nil && ev.Seq != nil {
				last, found = max(last, *ev.Seq), true
			}
		}
		if found || off == 0 {
			return last, nil
		}
		off = 0
	}
}

// output queues out for the record, which holds its slab until the
// output is written.
func (r *recorder) output(out chunk) {
	if r.outq == nil || r.stopped.Load() {
		return
	}
	out.ref()
	r.outq <- out
}

// cutOutput turns queued output into pty.output lines of at most
// maxOutputData bytes, each stamped with the time its first byte arrived.
// Output is not copied on its way to the record: the queued slices are
// kept as they are (the PTY reader's slabs are never written again) and
// encoded from where they lie.
func (r *recorder) cutOutput() {
	defer close(r.flushed)
	var (
		held  pendingOutput
		batch []byte // the lines of one flush, reused
		first time.Time
	)
	if b, ok := recordBatches.Get().(*[]byte); ok {
		batch = *b
	}
	defer func() { recordBatches.Put(&batch) }()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	// flush records whole chunks (all that is held when partial is set)
	// in one write and keeps the remainder.
	flush := func(partial bool) bool {
		n := held.n
		if !partial {
			n -= n % maxOutputData
		}
		if n == 0 {
			return false
		}
		batch = r.writeOutput(batch[:0], first, &held, n)
		first = time.Now()
		return true
	}
	for {
		select {
		case p, ok := <-r.outq:
			if !ok {
				flush(true)
				return
			}
			if held.n == 0 {
				first = time.Now()
				linger.Reset(outputLinger)
			}
			held.add(p)
			// Take what else is queued into the same write.
			for more := true; more && held.n < maxRecordBatch; {
				select {
				case p, ok := <-r.outq:
					if !ok {
						flush(true)
						return
					}
					held.add(p)
				default:
					more = false
				}
			}
			if flush(false) {
				// Output streams: let it gather for a while, so that the
				// PTY reader hands over without waking us for every
				// 4 KiB read.
				time.Sleep(recordBatch)
			}
		case <-linger.C:
			flush(true)
		}
	}
}

// recordBatches keeps the write buffers of finished records (*[]byte) for
// the next: a stream's buffer grows to a few MiB.
var recordBatches sync.Pool

// writeOutput records the next n bytes of held as pty.output lines of at
// most maxOutputData bytes each, built in buf, with one write(2), and
// returns buf for reuse. A write holds whole lines only, so the record
// never has a line cut by another writer. The lines are encoded by hand:
// this is the hot path, and base64 never needs JSON escaping. A line that
// would pass the limit is not written: the record stops there, and what
// is held is dropped.
func (r *recorder) writeOutput(buf []byte, t time.Time, held *pendingOutput, n int) []byte {
	r.mu.Lock()
	if r.f == nil || r.stopped.Load() {
		r.mu.Unlock()
		held.drop()
		return buf
	}
	ts := fsops.Timestamp(t)
	over := false
	for n > 0 {
		chunk := held.next(min(n, maxOutputData))
		n -= len(chunk)
		start := len(buf)
		r.seq++
		buf = append(buf, `{"seq":`...)
		buf = strconv.AppendUint(buf, r.seq, 10)
		buf = append(buf, `,"ts":"`...)
		buf = append(buf, ts...)
		buf = append(buf, `","type":"pty.output","data_b64":"`...)
		buf = appendBase64(buf, chunk)
		buf = append(buf, "\"}\n"...)
		if r.limit > 0 && r.written+int64(len(buf)) > r.limit {
			buf, over = buf[:start], true
			r.seq--
			held.drop()
			break
		}
	}
	held.release()
	if len(buf) > 0 {
		r.appendLocked(buf)
	}
	first := over && r.stopLocked()
	r.mu.Unlock()
	if first && r.onLimit != nil {
		r.onLimit()
	}
	return buf
}

// stopLocked stops the record at its limit: it writes the one
// record.stopped line, past the limit, and reports whether this call
// stopped it.
func (r *recorder) stopLocked() bool {
	if r.stopped.Swap(true) {
		return false
	}
	r.seq++
	b, err := json.Marshal(Event{Seq: r.seq, TS: fsops.Timestamp(time.Now()), Type: EventStopped,
		Reason: StopReasonLimit, Limit: r.limit})
	if err != nil {
		r.fail(err)
		return true
	}
	r.appendLocked(append(b, '\n'))
	return true
}

// Event writes one event line, filling seq and ts. An event that would
// pass the limit stops the record instead.
func (r *recorder) Event(ev Event) {
	r.mu.Lock()
	if r.f == nil || r.stopped.Load() {
		r.mu.Unlock()
		return // no record, closed (a late refusal after the exit) or stopped
	}
	r.seq++
	ev.Seq = r.seq
	if ev.TS == "" {
		ev.TS = fsops.Timestamp(time.Now())
	}
	b, err := json.Marshal(ev)
	first := false
	switch {
	case err != nil:
		r.fail(err)
	case r.limit > 0 && r.written+int64(len(b))+1 > r.limit:
		r.seq--
		first = r.stopLocked()
	default:
		r.appendLocked(append(b, '\n'))
	}
	r.mu.Unlock()
	if first && r.onLimit != nil {
		r.onLimit()
	}
}

func (r *recorder) appendLocked(line []byte) {
	if r.failed {
		return
	}
	r.written += int64(len(line))
	if _, err := r.f.Write(line); err != nil {
		r.fail(&os.PathError{Op: "append", Path: r.path, Err: err})
	}
}

// fail reports the first recording failure; the terminal keeps running
// without a record rather than dying with the agent's work in it.
func (r *recorder) fail(err error) {
	r.failed = true
	if r.log != nil {
		r.log(fmt.Errorf("recording stopped: %w", err))
	}
}

// FlushOutput writes all queued output; no Output may follow.
func (r *recorder) FlushOutput() {
	if r.outq == nil {
		return
	}
	close(r.outq)
	<-r.flushed
}

// discard closes a record nothing was written to, removing it if this
// terminal created it: a terminal that never started leaves no trace.
func (r *recorder) discard() {
	r.FlushOutput()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return
	}
	r.f.Close()
	r.f = nil
	if r.created {
		_ = os.Remove(r.path) // best effort
	}
}

// Close closes the record. Like every event stream it is not fsynced:
// appends are ordered and whole-line, and the kernel writes them back; an
// fsync of a long session's record would hold the exit for the time it
// takes to write it all to disk.
func (r *recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
