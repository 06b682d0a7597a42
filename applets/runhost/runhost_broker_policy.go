package runhost

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"ctx/applets/authority"
	"ctx/fsops"
	"ctx/policy"
)

// /mnt/proc/policy for the life of a run, and decide's reading of the
// tree behind it: a watch on every directory the policy is computed from
// rewrites the file after a change, and tells decide when what it read
// for the last call no longer stands.

// refreshPolicy rewrites /mnt/proc/policy from the tree as it is now.
// watchPolicy runs it whenever a control changes; a refused call, before
// its answer.
func (b *Broker) refreshPolicy() {
	a, err := authority.LoadAgent(b.R.Root, b.R.Agent.Name)
	if err != nil {
		return
	}
	_, lines := projectTools(authority.NewAgents(b.R.Root, a), a)
	b.writePolicy(lines)
}

// policyIgnored are entries of watched directories that the tree writes
// as it runs and that decide nothing: their changes do not rewrite
// /mnt/proc/policy.
var policyIgnored = map[string]bool{"log": true, "status": true, "pid": true, ".policy.tmp": true}

// policyWatchDelay is how long a run goes before its policy watch starts.
// Until then every decision reads the tree afresh (a reading per call)
// and /mnt/proc/policy is rewritten only on refusals. Why: the
// kernel ends an inotify instance only after a grace period (an SRCU
// synchronisation behind the mark reaper), which the run
// host pays when it closes the watch or exits; a short run (ctx agent
// start A -- cmd, a one-shot MCP call) gains nothing from a watch and was
// paying that on every start.
const policyWatchDelay = 100 * time.Millisecond

// watchPolicy keeps /mnt/proc/policy in step with the tree for the life of
// the run: every change to the controls it is computed from (the agents'
// control directories, the tool tiers and their tools' control
// directories, the shared spaces, and every directory above those) rewrites
// it, a short moment later so that a burst of changes is one rewrite. The
// same watch tells decide whether what it read for the last call still
// stands (b.changed). It starts policyWatchDelay into the run.
func (b *Broker) watchPolicy() {
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	b.watchTimer = time.AfterFunc(policyWatchDelay, b.startWatch)
}

func (b *Broker) startWatch() {
	b.watchOnce.Do(func() {
		w, err := fsops.NewDirWatch()
		if err != nil {
			return
		}
		w.AddWithAncestors(b.R.Root.Dir, b.policyDirs()...)
		b.cacheMu.Lock()
		if b.watchStopped {
			b.cacheMu.Unlock()
			w.Close()
			return
		}
		// What was read before the watch held may be stale already: the
		// next decision reads again, and the policy is rewritten once.
		b.watch = w
		b.noteChangeLocked()
		b.cacheMu.Unlock()
		go func() {
			for first := true; first || w.Wait(1000); first = false {
				if !b.changed() {
					continue
				}
				time.Sleep(20 * time.Millisecond)
				b.changed() // the rest of a burst
				b.refreshPolicy()
				w.AddWithAncestors(b.R.Root.Dir, b.policyDirs()...) // directories made since
			}
		}()
	})
}

// refreshSoon rewrites /mnt/proc/policy for a change no watch sees (the
// egress's: a forwarder added during the run), unless the run is ending.
func (b *Broker) refreshSoon() {
	b.cacheMu.Lock()
	stopped := b.watchStopped
	b.cacheMu.Unlock()
	if !stopped {
		go b.refreshPolicy()
	}
}

// stopWatch ends the policy watch, or keeps it from starting.
func (b *Broker) stopWatch() {
	b.cacheMu.Lock()
	b.watchStopped = true
	if b.watchTimer != nil {
		b.watchTimer.Stop()
	}
	w := b.watch
	b.cacheMu.Unlock()
	if w != nil {
		w.Close()
	}
}

// changed consumes the watch's queued changes and reports whether the tree
// changed since the last call (or a decide saw a change the refresher has
// not acted on yet); it drops decide's cached reading either way.
func (b *Broker) changed() bool {
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	if b.watch.Changed(policyIgnored) {
		b.noteChangeLocked()
	}
	c := b.pending
	b.pending = false
	return c
}

// lookupTool finds tool for the calling agent: its controls and its
// trusted tool path as the tree is now, read again after any change the
// watch reports (or when the watch is incomplete), else the reading of the
// last call. Changes are queued by the kernel before the write that makes
// them returns, so a decision never uses a reading older than a completed
// change. tier is the hit's tier as the agent's path names it; found is
// false when no trusted tool of that name is on the path.
func (b *Broker) lookupTool(tool string) (a *policy.Agent, hit fsops.ToolHit, tier string, found bool, err error) {
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	if b.watch == nil || !b.watch.Complete() {
		b.cache = nil
		b.pending = true
	} else if b.watch.Changed(policyIgnored) {
		b.noteChangeLocked()
	}
	if b.cache == nil {
		a, err := authority.LoadAgent(b.R.Root, b.R.Agent.Name)
		if err != nil {
			return nil, hit, "", false, err
		}
		b.cache = &decideCache{agent: a, path: authority.TrustedToolDirs(b.R.Root, a)}
	}
	// Under the lock: the trust rule's verdicts are kept in the reading.
	hit, lerr := b.cache.path.Lookup(tool)
	if lerr != nil {
		return b.cache.agent, hit, "", false, nil
	}
	return b.cache.agent, hit, b.cache.path.TierOf(hit.Dir), true, nil
}

// noteChangeLocked is what a reader of the watch does when it reports a
// change (under cacheMu): decide's reading is dropped, the refresher is
// told, the policy's generation moves on, and the run's egress proxy
// decides its open relays again (network.go).
func (b *Broker) noteChangeLocked() {
	b.cache = nil
	b.pending = true
	b.policyGen++
	b.R.net.PolicyChanged()
}

// policyGeneration consumes the watch's queued changes as decide does and
// returns how many it has seen; watched is false while no complete watch
// holds, when every reading must be fresh.
func (b *Broker) policyGeneration() (gen uint64, watched bool) {
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	if b.watch == nil || !b.watch.Complete() {
		return 0, false
	}
	if b.watch.Changed(policyIgnored) {
		b.noteChangeLocked()
	}
	return b.policyGen, true
}

// decideCache is what decide read from the tree for the last call.
type decideCache struct {
	agent *policy.Agent
	path  authority.ToolPath
}

// policyDirs are the directories /mnt/proc/policy is computed from.
func (b *Broker) policyDirs() []string {
	root := b.R.Root
	dirs := []string{root.AgentDir(), root.Path("shared")}
	withControls := func(dir string) {
		dirs = append(dirs, dir)
		entries, _ := os.ReadDir(dir)
		for _, en := range entries {
			if en.IsDir() && strings.HasSuffix(en.Name(), ".d") {
				dirs = append(dirs, filepath.Join(dir, en.Name()))
			}
		}
	}
	withControls(root.AgentDir())
	withControls(root.Path("shared"))
	for _, tier := range authority.ToolDirs(root, b.R.Agent) {
		withControls(tier)
	}
	return dirs
}

// writePolicy replaces /mnt/proc/policy with the tool lines of the latest
// decision and the run's other lines.
func (b *Broker) writePolicy(toolLines []string) {
	lines := append(append([]string(nil), toolLines...), b.static...)
	if n := b.R.net; n != nil {
		lines = append(lines, n.ProcLines()...) // the grants as they are now
	}
	sort.Strings(lines)
	text := strings.Join(lines, "\n") + "\n"
	// One writer at a time, and only when the decision changed: calls run
	// concurrently, and most find the policy as the last one left it.
	b.mu.Lock()
	defer b.mu.Unlock()
	if text == b.policyText {
		return
	}
	if fsops.WriteVolatile(b.policyFile, []byte(text), 0o644) == nil {
		b.policyText = text
	}
}
