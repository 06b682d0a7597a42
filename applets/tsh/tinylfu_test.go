package tsh

import (
	"container/list"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestTinyLFUSizes(t *testing.T) {
	for _, tc := range []struct{ capacity, percent, window, main int }{
		{32, 1, 1, 31}, // the defaults: ceil(0.32) = 1
		{10, 15, 2, 8}, // ceil(1.5) = 2
		{4, 25, 1, 3},  // exact
		{5, 100, 5, 1}, // main never below 1
		{1, 1, 1, 1},   // capacity 1: both 1, the final trim keeps one
		{0, 0, 1, 1},   // raised to 1
		{1024, 200, 1024, 1},
	} {
		c := NewTinyLFU[int](tc.capacity, tc.percent)
		if c.windowCap != tc.window || c.mainCap != tc.main {
			t.Errorf("NewTinyLFU(%d, %d): window %d main %d, want %d %d", tc.capacity, tc.percent, c.windowCap, c.mainCap, tc.window, tc.main)
		}
	}
}

// op is one step of a scripted cache sequence: "a" accesses a, "+a" pins a,
// "-a" unpins a, "!a" removes a.
func runOps(c *TinyLFU[int], ops string) {
	for _, op := range strings.Fields(ops) {
		switch op[0] {
		case '+':
			c.Pin(op[1:], 0)
		case '-':
			c.Unpin(op[1:])
		case '!':
			c.Remove(op[1:])
		default:
			c.Access(op, 0)
		}
	}
}

func TestTinyLFUSequences(t *testing.T) {
	for _, tc := range []struct {
		name              string
		capacity, percent int
		ops               string
		want              CacheContents
	}{
		{
			// Window 1, main 3. Main fills in arrival order; then d beats
			// the main victim a (equal frequency, d newer).
			name: "fill and replace", capacity: 4, percent: 25,
			ops:  "a b c d e",
			want: CacheContents{Window: []string{"e"}, Main: []string{"b", "c", "d"}},
		},
		{
			// a is used three times, so it survives while one-off names
			// replace each other.
			name: "frequency protects", capacity: 4, percent: 25,
			ops:  "a a a b c d e f",
			want: CacheContents{Window: []string{"f"}, Main: []string{"a", "d", "e"}},
		},
		{
			// Window 1, main 1. b (freq 1) loses to a (freq 2) and is
			// dropped; c too; when b comes back its count is 2 and, equal
			// to a's but newer, it wins.
			name: "admission by frequency", capacity: 2, percent: 50,
			ops:  "a a b c b d",
			want: CacheContents{Window: []string{"d"}, Main: []string{"b"}},
		},
		{
			// A hit in main refreshes a's last use and raises its count.
			name: "hits count", capacity: 4, percent: 25,
			ops:  "a b c d a e f g",
			want: CacheContents{Window: []string{"g"}, Main: []string{"a", "e", "f"}},
		},
		{
			// Pinned a is neither counted nor evicted.
			name: "pinned", capacity: 2, percent: 50,
			ops:  "a +a b c d",
			want: CacheContents{Window: []string{"d"}, Main: []string{"c"}, Pinned: []string{"a"}},
		},
		{
			// Unpinning leaves a in place until the next access trims.
			name: "unpinned stays", capacity: 2, percent: 50,
			ops:  "a +a b c d -a",
			want: CacheContents{Window: []string{"a", "d"}, Main: []string{"c"}},
		},
		{
			// Then the next access drops a (oldest, equal count) and d
			// replaces c.
			name: "unpinned trimmed", capacity: 2, percent: 50,
			ops:  "a +a b c d -a e",
			want: CacheContents{Window: []string{"e"}, Main: []string{"d"}},
		},
		{
			name: "capacity one", capacity: 1, percent: 1,
			ops:  "a b b c",
			want: CacheContents{Window: []string{"c"}},
		},
		{
			// Pinning an absent key inserts it without counting an access.
			name: "pin absent", capacity: 2, percent: 50,
			ops:  "+x a b c",
			want: CacheContents{Window: []string{"c"}, Main: []string{"b"}, Pinned: []string{"x"}},
		},
		{
			// A removed (stale) key keeps its count: back with count 4,
			// a beats b (count 2), which a fresh a (count 1) would not.
			name: "remove keeps frequency", capacity: 2, percent: 50,
			ops:  "a a a !a b b c a d",
			want: CacheContents{Window: []string{"d"}, Main: []string{"a"}},
		},
	} {
		c := NewTinyLFU[int](tc.capacity, tc.percent)
		runOps(c, tc.ops)
		if got := c.Contents(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: after %q: %+v, want %+v", tc.name, tc.ops, got, tc.want)
		}
	}
}

func TestTinyLFUPeekAndValues(t *testing.T) {
	c := NewTinyLFU[string](4, 25)
	if _, ok := c.Peek("a"); ok {
		t.Fatal("empty cache hit")
	}
	c.Access("a", "one")
	c.Access("a", "two")
	if v, ok := c.Peek("a"); !ok || v != "two" {
		t.Errorf("Peek = %q, %v", v, ok)
	}
	if c.freq["a"] != 2 || c.clock != 2 {
		t.Errorf("Peek must not count: freq %d clock %d", c.freq["a"], c.clock)
	}
}

// lru is the baseline for the hit-rate comparison: plain least recently
// used of the same capacity.
type lru struct {
	capacity int
	order    *list.List
	items    map[string]*list.Element
}

func newLRU(capacity int) *lru {
	return &lru{capacity: capacity, order: list.New(), items: map[string]*list.Element{}}
}

func (l *lru) access(key string) bool {
	if e, ok := l.items[key]; ok {
		l.order.MoveToFront(e)
		return true
	}
	l.items[key] = l.order.PushFront(key)
	if l.order.Len() > l.capacity {
		delete(l.items, l.order.Remove(l.order.Back()).(string))
	}
	return false
}

// zipfTrace returns n tool names drawn from a Zipf distribution over
// distinct names: a few tools are used all the time, most rarely.
func zipfTrace(seed int64, n, distinct int, s float64) []string {
	r := rand.New(rand.NewSource(seed))
	z := rand.NewZipf(r, s, 1, uint64(distinct-1))
	trace := make([]string, n)
	for i := range trace {
		trace[i] = fmt.Sprintf("tool%d", z.Uint64())
	}
	return trace
}

// hitRates replays trace against W-TinyLFU and LRU of the same capacity.
func hitRates(trace []string, capacity, percent int) (tiny, plain float64) {
	c := NewTinyLFU[struct{}](capacity, percent)
	l := newLRU(capacity)
	var th, lh int
	for _, k := range trace {
		if _, ok := c.Peek(k); ok {
			th++
		}
		c.Access(k, struct{}{})
		if l.access(k) {
			lh++
		}
	}
	return float64(th) / float64(len(trace)), float64(lh) / float64(len(trace))
}

func TestTinyLFUBeatsLRUOnZipf(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		tiny, plain := hitRates(zipfTrace(seed, 20000, 500, 1.1), 32, 1)
		if tiny <= plain {
			t.Errorf("seed %d: W-TinyLFU hit rate %.3f, LRU %.3f", seed, tiny, plain)
		}
	}
}

// BenchmarkCacheHitRate reports the hit rates of W-TinyLFU (the default
// 32 entries, 1% window) and plain LRU of the same capacity on a Zipf
// trace, and their ratio.
func BenchmarkCacheHitRate(b *testing.B) {
	trace := zipfTrace(1, 100000, 1000, 1.1)
	var tiny, plain float64
	for i := 0; i < b.N; i++ {
		tiny, plain = hitRates(trace, 32, 1)
	}
	b.ReportMetric(tiny*100, "tinylfu-hit%")
	b.ReportMetric(plain*100, "lru-hit%")
	b.ReportMetric(tiny/plain, "ratio")
}

// CacheContents is a snapshot of a cache, each list sorted by key.
type CacheContents struct {
	Window, Main []string // unpinned entries by segment
	Pinned       []string // pinned entries, whatever their segment
}

// Contents returns the current contents.
func (c *TinyLFU[V]) Contents() CacheContents {
	var s CacheContents
	for k, e := range c.entries {
		switch {
		case c.pinned[k]:
			s.Pinned = append(s.Pinned, k)
		case e.seg == windowSegment:
			s.Window = append(s.Window, k)
		default:
			s.Main = append(s.Main, k)
		}
	}
	sort.Strings(s.Window)
	sort.Strings(s.Main)
	sort.Strings(s.Pinned)
	return s
}
