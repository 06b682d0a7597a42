package tsh

// TinyLFU is the W-TinyLFU cache tsh keeps resolved tool paths in
// (cache_capacity, window_percent in tool/tsh.d/config).
//
// Entries live in one of two segments. A key seen for the first time enters
// the small admission *window*, which absorbs bursts of one-off names. When
// the window overflows, its oldest entry is a candidate for the *main*
// segment: it moves there while main has room; otherwise it must beat main's
// victim (the entry with the lowest frequency, then the oldest use, then the
// smallest key) on frequency, or on recency at equal frequency, and the
// loser is dropped. Frequencies are exact per-key counters, kept for keys
// after eviction, so a name that comes back often earns its place.
//
// The reference keeps an unbounded counter map with no sketch and no decay;
// so does this cache. tsh only records names that resolved to a tool, so the
// map is bounded by the number of tools that exist.
//
// Pinned keys are excluded from every count and are never candidates or
// victims. Every tie is broken by (frequency, last use, key), so a given
// sequence of operations always leaves the same contents.
//
// A TinyLFU is not safe for concurrent use.
type TinyLFU[V any] struct {
	capacity  int // unpinned entries kept in total
	windowCap int // unpinned entries the window holds before admission runs
	mainCap   int // unpinned entries main holds before it must evict to admit

	clock   uint64            // logical time, one tick per Access
	freq    map[string]uint64 // accesses per key, ever
	entries map[string]*lfuEntry[V]
	pinned  map[string]bool
}

type segment uint8

const (
	windowSegment segment = iota
	mainSegment
)

type lfuEntry[V any] struct {
	key      string
	value    V
	seg      segment
	lastUsed uint64
}

// NewTinyLFU returns a cache of capacity unpinned entries with an admission
// window of windowPercent percent of it: window = clamp(ceil(capacity ×
// windowPercent / 100), 1, capacity), main = max(capacity − window, 1).
// Capacity and percentage below 1 are raised to 1, a percentage above 100
// is lowered to 100.
func NewTinyLFU[V any](capacity, windowPercent int) *TinyLFU[V] {
	capacity = max(capacity, 1)
	windowPercent = min(max(windowPercent, 1), 100)
	window := min(max((capacity*windowPercent+99)/100, 1), capacity)
	return &TinyLFU[V]{
		capacity:  capacity,
		windowCap: window,
		mainCap:   max(capacity-window, 1),
		freq:      map[string]uint64{},
		entries:   map[string]*lfuEntry[V]{},
		pinned:    map[string]bool{},
	}
}

// Peek returns the cached value of key without recording an access.
func (c *TinyLFU[V]) Peek(key string) (V, bool) {
	if e, ok := c.entries[key]; ok {
		return e.value, true
	}
	var zero V
	return zero, false
}

// Access records one use of key with its current value: it bumps the key's
// frequency and the clock, inserts the key into the window when absent,
// then runs admission and eviction. The key being accessed is never
// evicted by its own access.
func (c *TinyLFU[V]) Access(key string, v V) {
	c.clock++
	c.freq[key]++
	e, ok := c.entries[key]
	if !ok {
		e = &lfuEntry[V]{key: key, seg: windowSegment}
		c.entries[key] = e
	}
	e.value, e.lastUsed = v, c.clock
	c.admit(key)
	for c.count(windowSegment)+c.count(mainSegment) > c.capacity {
		victim := c.mainVictim(key)
		if victim == nil {
			victim = c.oldestWindow(key)
		}
		if victim == nil {
			break
		}
		delete(c.entries, victim.key)
	}
}

// admit moves window overflow into main or drops it. The key being accessed
// is never a victim (it can only overflow the window after an Unpin).
func (c *TinyLFU[V]) admit(accessed string) {
	for c.count(windowSegment) > c.windowCap {
		cand := c.oldestWindow(accessed)
		if cand == nil {
			return
		}
		if c.count(mainSegment) < c.mainCap {
			cand.seg = mainSegment
			continue
		}
		victim := c.mainVictim(accessed)
		if victim == nil { // main holds only pinned keys and the accessed one: nothing to compete with
			cand.seg = mainSegment
			continue
		}
		fc, fv := c.freq[cand.key], c.freq[victim.key]
		if fc > fv || fc == fv && cand.lastUsed > victim.lastUsed {
			delete(c.entries, victim.key)
			cand.seg = mainSegment
		} else {
			delete(c.entries, cand.key)
		}
	}
}

// Pin protects key: it is no longer counted, admitted or evicted. An absent
// key is inserted into the window with value v; pinning is not an access.
func (c *TinyLFU[V]) Pin(key string, v V) {
	c.pinned[key] = true
	if e, ok := c.entries[key]; ok {
		e.value = v
		return
	}
	c.entries[key] = &lfuEntry[V]{key: key, value: v, seg: windowSegment, lastUsed: c.clock}
}

// Unpin removes the protection; the entry stays where it is until a later
// access evicts it normally.
func (c *TinyLFU[V]) Unpin(key string) { delete(c.pinned, key) }

// Remove drops key's entry (a stale path). A pin and the frequency count
// outlive the entry.
func (c *TinyLFU[V]) Remove(key string) { delete(c.entries, key) }

// count returns the number of unpinned entries in seg. The scans are
// linear: at most 1024 unpinned entries, a handful per command.
func (c *TinyLFU[V]) count(seg segment) int {
	n := 0
	for k, e := range c.entries {
		if e.seg == seg && !c.pinned[k] {
			n++
		}
	}
	return n
}

// oldestWindow returns the unpinned window entry with the smallest
// (last use, key), never except;
// nil when there is none.
func (c *TinyLFU[V]) oldestWindow(except string) *lfuEntry[V] {
	var best *lfuEntry[V]
	for k, e := range c.entries {
		if e.seg != windowSegment || c.pinned[k] || k == except {
			continue
		}
		if best == nil || e.lastUsed < best.lastUsed || e.lastUsed == best.lastUsed && k < best.key {
			best = e
		}
	}
	return best
}

// mainVictim returns the unpinned main entry with the smallest (frequency,
// last use, key), never except;
// nil when there is none.
func (c *TinyLFU[V]) mainVictim(except string) *lfuEntry[V] {
	var best *lfuEntry[V]
	for k, e := range c.entries {
		if e.seg != mainSegment || c.pinned[k] || k == except {
			continue
		}
		if best == nil || c.less(e, best) {
			best = e
		}
	}
	return best
}

func (c *TinyLFU[V]) less(a, b *lfuEntry[V]) bool {
	fa, fb := c.freq[a.key], c.freq[b.key]
	if fa != fb {
		return fa < fb
	}
	if a.lastUsed != b.lastUsed {
		return a.lastUsed < b.lastUsed
	}
	return a.key < b.key
}
