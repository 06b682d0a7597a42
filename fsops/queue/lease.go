package queue

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// Lease is the content of lease/J/worker: who holds the claim of J and how
// to tell, later, whether that process is still running.
//
//	{"worker":"w1","host":"box/pid:[4026531836]","pid":4242,"pid_start":918273,"claimed_at":"2026-06-22T12:00:00.123456789Z"}
//
// host identifies the kernel and PID namespace the pid belongs to: the host
// name, "/", and the PID namespace of the claiming process as the kernel
// names it (readlink /proc/self/ns/pid). A pid means nothing outside its
// namespace, so a lease written inside a sandbox with its own PID namespace
// can only be judged from inside that namespace.
// pid_start is field 22 of
// /proc/PID/stat (start time in clock ticks after boot), which tells a
// reused pid apart; 0 means it could not be read.
//
// token (16 hex digits, fresh for each claim) names the claim itself:
// finish checks it, so a worker finishes only the claim it holds, whatever
// its name. heartbeat_ms is the interval at which the holder renews the
// lease by touching lease/J/worker (its mtime is the last renewal); a
// lease not renewed for LeaseExpiry intervals is abandoned, and recover
// takes it from any host. Leases written before these fields existed
// (neither field) never expire.
type Lease struct {
	Worker      string `json:"worker"`
	Host        string `json:"host"`
	PID         int    `json:"pid"`
	PIDStart    uint64 `json:"pid_start"`
	ClaimedAt   string `json:"claimed_at"`
	Token       string `json:"token,omitempty"`
	HeartbeatMS int64  `json:"heartbeat_ms,omitempty"`
	// Renewed is the lease file's mtime, where it was read from disk.
	Renewed time.Time `json:"-"`
}

// LeaseExpiry is how many heartbeat intervals a lease may go unrenewed
// before it is abandoned.
const LeaseExpiry = 3

// coarseSlack is added to the expiry of a lease whose renewal time has no
// sub-second part: the filesystem keeps whole seconds (SFTP does).
const coarseSlack = time.Second

// DefaultHeartbeat is the heartbeat interval of a claim that names none.
const DefaultHeartbeat = 10 * time.Second

// maxHeartbeatMS bounds heartbeat_ms: one day.
const maxHeartbeatMS = 24 * 3600 * 1000

// MaxLease bounds a lease file.
const MaxLease = 4096

// maxPID is the largest pid Linux can hand out (PID_MAX_LIMIT on 64-bit).
const maxPID = 1 << 22

// Marshal encodes the lease as one JSON line, exactly as encoding/json
// does: by hand where every string is plain (the usual case, and the
// claim's hot path), else through encoding/json.
func (l Lease) Marshal() []byte {
	if !plainJSON(l.Worker) || !plainJSON(l.Host) || !plainJSON(l.ClaimedAt) || !plainJSON(l.Token) {
		b, _ := json.Marshal(l)
		return append(b, '\n')
	}
	b := make([]byte, 0, 80+len(l.Worker)+len(l.Host)+len(l.ClaimedAt))
	b = append(b, `{"worker":"`...)
	b = append(b, l.Worker...)
	b = append(b, `","host":"`...)
	b = append(b, l.Host...)
	b = append(b, `","pid":`...)
	b = strconv.AppendInt(b, int64(l.PID), 10)
	b = append(b, `,"pid_start":`...)
	b = strconv.AppendUint(b, l.PIDStart, 10)
	b = append(b, `,"claimed_at":"`...)
	b = append(b, l.ClaimedAt...)
	b = append(b, '"')
	if l.Token != "" {
		b = append(b, `,"token":"`...)
		b = append(b, l.Token...)
		b = append(b, '"')
	}
	if l.HeartbeatMS != 0 {
		b = append(b, `,"heartbeat_ms":`...)
		b = strconv.AppendInt(b, l.HeartbeatMS, 10)
	}
	return append(b, "}\n"...)
}

// plainJSON reports whether encoding/json writes s as itself between
// quotes: printable ASCII other than the characters it escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// ParseLease parses and validates a lease file. It accepts exactly one JSON
// object with exactly the five fields, each present once: worker a valid
// object name, host 1-255 printable ASCII bytes without spaces, pid in
// 1..4194304, pid_start a non-negative integer, claimed_at an RFC 3339
// time. Anything else is an error naming the field.
func ParseLease(b []byte) (Lease, error) {
	if len(b) > MaxLease {
		return Lease{}, fmt.Errorf("lease: larger than %d bytes", MaxLease)
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return Lease{}, fmt.Errorf("lease: not a JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Lease{}, errors.New("lease: data after the JSON object")
	}
	if raw == nil {
		return Lease{}, errors.New("lease: not a JSON object")
	}
	if err := uniqueKeys(b); err != nil {
		return Lease{}, err
	}
	var l Lease
	fields := []struct {
		key string
		dst any
	}{{"worker", &l.Worker}, {"host", &l.Host}, {"pid", &l.PID}, {"pid_start", &l.PIDStart}, {"claimed_at", &l.ClaimedAt}}
	for _, f := range fields {
		v, ok := raw[f.key]
		if !ok {
			return Lease{}, fmt.Errorf("lease: missing field %q", f.key)
		}
		if err := strictUnmarshal(v, f.dst); err != nil {
			return Lease{}, fmt.Errorf("lease: field %q: %v", f.key, err)
		}
		delete(raw, f.key)
	}
	for _, f := range []struct {
		key string
		dst any
	}{{"token", &l.Token}, {"heartbeat_ms", &l.HeartbeatMS}} {
		if v, ok := raw[f.key]; ok {
			if err := strictUnmarshal(v, f.dst); err != nil {
				return Lease{}, fmt.Errorf("lease: field %q: %v", f.key, err)
			}
			delete(raw, f.key)
		}
	}
	for k := range raw {
		return Lease{}, fmt.Errorf("lease: unknown field %q", k)
	}
	if err := validToken(l.Token); err != nil {
		return Lease{}, fmt.Errorf("lease: field \"token\": %v", err)
	}
	if l.HeartbeatMS < 0 || l.HeartbeatMS > maxHeartbeatMS {
		return Lease{}, fmt.Errorf("lease: field \"heartbeat_ms\": %d is not in 0..%d", l.HeartbeatMS, maxHeartbeatMS)
	}
	if err := ValidWorkerName(l.Worker); err != nil {
		return Lease{}, fmt.Errorf("lease: field \"worker\": %v", err)
	}
	if err := validHost(l.Host); err != nil {
		return Lease{}, fmt.Errorf("lease: field \"host\": %v", err)
	}
	if l.PID < 1 || l.PID > maxPID {
		return Lease{}, fmt.Errorf("lease: field \"pid\": %d is not in 1..%d", l.PID, maxPID)
	}
	if _, err := time.Parse(time.RFC3339Nano, l.ClaimedAt); err != nil {
		return Lease{}, fmt.Errorf("lease: field \"claimed_at\": not an RFC 3339 time")
	}
	return l, nil
}

// strictUnmarshal decodes one JSON value, refusing a null (which
// encoding/json would silently accept as "no change").
func strictUnmarshal(v json.RawMessage, dst any) error {
	if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return errors.New("null")
	}
	return json.Unmarshal(v, dst)
}

// uniqueKeys refuses a top-level key given twice: encoding/json would keep
// the last silently, and a lease must say one thing.
func uniqueKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		if seen[k] {
			return fmt.Errorf("lease: field %q given twice", k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// validToken accepts "" (a lease without a token) or 1 to 64 lowercase
// hex digits.
func validToken(t string) error {
	if len(t) > 64 {
		return errors.New("longer than 64 bytes")
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("byte %d is not a lowercase hex digit", i)
		}
	}
	return nil
}

// newToken is a fresh claim token: 16 hex digits.
func newToken() string {
	var r [8]byte
	if err := fsops.RandomBytes(r[:]); err != nil {
		panic(fmt.Sprintf("queue: no system entropy: %v", err))
	}
	return hex.EncodeToString(r[:])
}

func validHost(h string) error {
	if h == "" || len(h) > 255 {
		return errors.New("must be 1 to 255 bytes")
	}
	for i := 0; i < len(h); i++ {
		if h[i] <= ' ' || h[i] > '~' {
			return fmt.Errorf("byte %d is not printable ASCII", i)
		}
	}
	return nil
}

// hostID names this kernel and PID namespace as leases record it. ok is
// false when /proc is not mounted, in which case no lease can be judged.
var hostID = sync.OnceValues(func() (string, bool) {
	var u unix.Utsname
	node := "localhost"
	if err := unix.Uname(&u); err == nil {
		if n := unix.ByteSliceToString(u.Nodename[:]); n != "" {
			node = n
		}
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return sanitizeHost(node), false
	}
	return sanitizeHost(node + "/" + ns), true
})

func sanitizeHost(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c <= ' ' || c > '~' {
			b[i] = '_'
		}
	}
	if len(b) > 255 {
		b = b[:255]
	}
	return string(b)
}

// procStat returns the state letter and start time (field 22) of pid from
// /proc/PID/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after the last ')'.
func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, errors.New("malformed /proc stat")
	}
	return f[0][0], start, nil
}

// Owner is who takes a claim: a worker name and the process whose life the
// lease is tied to (0 means the calling process).
type Owner struct {
	Worker string
	PID    int
	// Heartbeat is the interval at which the holder promises to renew the
	// lease (Renew); 0 means DefaultHeartbeat, negative none (the lease
	// then never expires, and only --force recovers it from another host).
	Heartbeat time.Duration
}

// newLease makes the lease for owner at time now. The process must exist.
// The identity part (host, pid, start time) is computed once per owner and
// kept in cache, since a claiming loop would otherwise read /proc for every
// job; a process other than this one is checked to still exist each time.
func newLease(o Owner, now time.Time, cache map[Owner]Lease) (Lease, error) {
	if l, ok := cache[o]; ok {
		if o.PID != 0 && unix.Kill(o.PID, 0) == unix.ESRCH {
			delete(cache, o)
			return Lease{}, fmt.Errorf("%w: pid %d: no such process", ErrInvalid, o.PID)
		}
		l.ClaimedAt = now.UTC().Format(time.RFC3339Nano)
		l.Token = newToken()
		return l, nil
	}
	if err := ValidWorkerName(o.Worker); err != nil {
		return Lease{}, fmt.Errorf("%w: worker: %v", ErrInvalid, err)
	}
	pid := o.PID
	if pid == 0 {
		pid = os.Getpid()
	}
	if pid < 1 || pid > maxPID {
		return Lease{}, fmt.Errorf("%w: pid %d is not in 1..%d", ErrInvalid, pid, maxPID)
	}
	if err := unix.Kill(pid, 0); err == unix.ESRCH {
		return Lease{}, fmt.Errorf("%w: pid %d: no such process", ErrInvalid, pid)
	}
	host, _ := hostID()
	_, start, err := procStat(pid)
	if err != nil {
		start = 0 // unknown: such a lease can only be recovered with force
	}
	hb := o.Heartbeat
	switch {
	case hb == 0:
		hb = DefaultHeartbeat
	case hb < 0:
		hb = 0
	case hb.Milliseconds() < 1 || hb.Milliseconds() > maxHeartbeatMS:
		return Lease{}, fmt.Errorf("%w: heartbeat %s is not in 1ms..24h", ErrInvalid, o.Heartbeat)
	}
	l := Lease{Worker: o.Worker, Host: host, PID: pid, PIDStart: start,
		ClaimedAt: now.UTC().Format(time.RFC3339Nano), HeartbeatMS: hb.Milliseconds()}
	if cache != nil {
		cache[o] = l
	}
	l.Token = newToken()
	return l, nil
}

// Holder is what can be known about a lease's process from here.
type Holder int

const (
	// HolderUnknown: the lease cannot be judged here (another host or PID
	// namespace, no /proc, no recorded start time). Only force recovers.
	HolderUnknown Holder = iota
	// HolderAlive: the very process that claimed is still running.
	HolderAlive
	// HolderGone: that process has provably ended.
	HolderGone
)

func (h Holder) String() string {
	switch h {
	case HolderAlive:
		return "alive"
	case HolderGone:
		return "gone"
	}
	return "unknown"
}

// HolderState judges whether the lease's process is still running, with a
// reason for messages. It is provably gone only on this host and PID
// namespace, and only when the pid does not exist, is a zombie, or now
// belongs to a process with another start time.
func (l Lease) HolderState() (Holder, string) {
	h, why := l.holderHere()
	if h != HolderUnknown || l.HeartbeatMS == 0 || l.Renewed.IsZero() {
		return h, why
	}
	// Judged by its heartbeat: from another host, or where its process
	// cannot be judged. Hosts' clocks must agree to well within the
	// expiry (ctx man ctx.shared).
	hb := time.Duration(l.HeartbeatMS) * time.Millisecond
	age := time.Since(l.Renewed).Round(time.Millisecond)
	expiry := LeaseExpiry * hb
	if l.Renewed.Nanosecond() == 0 {
		// A filesystem that keeps whole seconds (SFTP) makes every
		// renewal look up to a second older than it is.
		expiry += coarseSlack
	}
	if age > expiry {
		return HolderGone, fmt.Sprintf("%s; lease not renewed for %s, more than %d heartbeats of %s: abandoned", why, age, LeaseExpiry, hb)
	}
	return HolderUnknown, fmt.Sprintf("%s; lease renewed %s ago (heartbeat %s, abandoned after %s)", why, age, hb, expiry)
}

// holderHere judges the lease's process where this host can see it.
func (l Lease) holderHere() (Holder, string) {
	id, ok := hostID()
	if !ok {
		return HolderUnknown, "cannot identify this host's PID namespace (/proc not mounted?)"
	}
	if l.Host != id {
		return HolderUnknown, fmt.Sprintf("lease from %s, this is %s", l.Host, id)
	}
	if err := unix.Kill(l.PID, 0); err == unix.ESRCH {
		return HolderGone, fmt.Sprintf("pid %d no longer exists", l.PID)
	}
	state, start, err := procStat(l.PID)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return HolderGone, fmt.Sprintf("pid %d no longer exists", l.PID)
	case err != nil:
		return HolderUnknown, fmt.Sprintf("pid %d: %v", l.PID, err)
	case state == 'Z' || state == 'X':
		return HolderGone, fmt.Sprintf("pid %d has exited (zombie)", l.PID)
	case l.PIDStart == 0:
		return HolderUnknown, fmt.Sprintf("pid %d exists and the lease has no start time", l.PID)
	case start != l.PIDStart:
		return HolderGone, fmt.Sprintf("pid %d now belongs to another process (started at tick %d, lease says %d)", l.PID, start, l.PIDStart)
	}
	return HolderAlive, fmt.Sprintf("pid %d (worker %s) is still running", l.PID, l.Worker)
}
