package tsh

import "sort"

// Context is the set of tools whose metadata a tsh process has loaded
// (`load`, `pin`). It lives as long as the process and is never persisted.
// Loading reads metadata only: it never runs the tool or loads a library.
//
// Each load, pin or run of a loaded tool is a use and bumps a logical clock.
// When more than max unpinned entries are loaded, the unpinned entry with
// the smallest (last use, name) is unloaded, and the caller reports it as
// auto-unloaded. Pinned entries are neither counted nor unloaded.
//
// A Context is not safe for concurrent use.
type Context struct {
	max     int
	clock   uint64
	entries map[string]*Loaded
}

// Loaded is one tool in the context.
type Loaded struct {
	Name, Path string
	Meta       Metadata
	Pinned     bool
	lastUsed   uint64
}

// NewContext returns an empty context holding at most max unpinned entries
// (at least 1).
func NewContext(max int) *Context {
	if max < 1 {
		max = 1
	}
	return &Context{max: max, entries: map[string]*Loaded{}}
}

// Load adds or refreshes a tool (keeping an existing pin), marks it used
// and returns the entries unloaded to stay within the limit.
func (c *Context) Load(name, path string, meta Metadata) []*Loaded {
	c.put(name, path, meta)
	return c.trim()
}

// Pin loads a tool and protects it from automatic unloading.
func (c *Context) Pin(name, path string, meta Metadata) {
	c.put(name, path, meta).Pinned = true
}

// Unpin removes the protection of a loaded tool and returns the entries
// unloaded to stay within the limit (possibly the tool itself, when it is
// the least recently used). ok is false when the tool is not loaded.
func (c *Context) Unpin(name string) (l *Loaded, ok bool, unloaded []*Loaded) {
	l, ok = c.entries[name]
	if !ok {
		return nil, false, nil
	}
	l.Pinned = false
	return l, true, c.trim()
}

// Unload removes an unpinned tool. ok is false when it is not loaded;
// a pinned tool is returned with ok true and left in place.
func (c *Context) Unload(name string) (l *Loaded, ok bool) {
	l, ok = c.entries[name]
	if ok && !l.Pinned {
		delete(c.entries, name)
	}
	return l, ok
}

// Touch marks a loaded tool used (running it). Unknown names are ignored.
func (c *Context) Touch(name string) {
	if l, ok := c.entries[name]; ok {
		c.clock++
		l.lastUsed = c.clock
	}
}

// Entries returns the loaded tools sorted by name, only the pinned ones
// when pinnedOnly.
func (c *Context) Entries(pinnedOnly bool) []*Loaded {
	var out []*Loaded
	for _, l := range c.entries {
		if l.Pinned || !pinnedOnly {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *Context) put(name, path string, meta Metadata) *Loaded {
	c.clock++
	l, ok := c.entries[name]
	if !ok {
		l = &Loaded{Name: name}
		c.entries[name] = l
	}
	l.Path, l.Meta, l.lastUsed = path, meta, c.clock
	return l
}

// trim unloads least recently used unpinned entries beyond max, in the
// order they go.
func (c *Context) trim() []*Loaded {
	var gone []*Loaded
	for {
		var victim *Loaded
		n := 0
		for _, l := range c.entries {
			if l.Pinned {
				continue
			}
			n++
			if victim == nil || l.lastUsed < victim.lastUsed || l.lastUsed == victim.lastUsed && l.Name < victim.Name {
				victim = l
			}
		}
		if n <= c.max {
			return gone
		}
		delete(c.entries, victim.Name)
		gone = append(gone, victim)
	}
}
