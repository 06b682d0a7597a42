package fsops

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"ctx/policy"
)

// In a tree several uids use (a root tree whose home/ is 1777), ctx never
// adopts a directory it did not make and never starts an agent another
// uid defined (DESIGN §16 rule 12). This file gathers the facts of those
// walks; policy.AgentDefTrust and policy.HomeTrust decide.

// ForeignError is a definition or home that another uid made: ctx neither
// starts nor adopts it. It unwraps to EACCES.
type ForeignError struct {
	What   string // what ctx refuses: "agent evil not started"
	Path   string // the component that failed, absolute
	Reason string // policy's reason (names the path, its owner or mode)
	Fix    string
}

func (e *ForeignError) Error() string {
	return e.What + ": " + e.Reason + "; " + e.Fix
}

func (e *ForeignError) Unwrap() error { return syscall.EACCES }

// TreeOwner is the owner of the tree root (stat: a symlinked root is the
// administrator's).
func (r Root) TreeOwner() (uint32, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(r.Dir, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: r.Dir, Err: err}
	}
	return st.Uid, nil
}

// trustFacts are the facts every walk here is judged with.
func (r Root) trustFacts() (policy.TrustFacts, error) {
	owner, err := r.TreeOwner()
	return policy.TrustFacts{Root: r.Dir, TreeOwner: owner}, err
}

// foreignFix is the one fix of a refused path: remove it, or take it over
// when its contents are known good. A directory above what ctx makes
// (the tree's own agent/ or home/) is only made writable by its owner.
func foreignFix(path string, owner uint32, above bool) string {
	q := ShellQuote(path)
	if above {
		return fmt.Sprintf("make it writable by its owner only (chmod go-w %s), or sticky where other users need to add to it (chmod 1777 %s)", q, q)
	}
	return fmt.Sprintf("remove it (rm -rf %s), or if you trust its contents: chown -R %d %s; chmod -R go-w %s", q, owner, q, q)
}

// AgentDefFacts gathers the walk policy.AgentDefTrust judges for agent
// name: the tree root, agent/, agent/NAME when present, agent/NAME.d and
// everything in it.
func (r Root) AgentDefFacts(name string) ([]policy.FileFacts, error) {
	facts, _, err := OwnerChain(r.Dir, r.AgentDir())
	if err != nil {
		return nil, err
	}
	if info, err := os.Lstat(r.Path("agent", name)); err == nil {
		facts = append(facts, ownerFacts(r.Path("agent", name), info))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ctl, more, err := ControlTreeFacts(r.AgentControl(name))
	if err != nil {
		return nil, err
	}
	if more {
		return nil, fmt.Errorf("%s holds more than %d entries", r.AgentControl(name), MaxControlEntries)
	}
	return append(facts, ctl...), nil
}

// CheckAgentDef refuses, with a *ForeignError, an agent definition caller
// may not start: one another uid made or may change.
func (r Root) CheckAgentDef(name string, caller uint32) error {
	t, err := r.trustFacts()
	if err != nil {
		return err
	}
	facts, err := r.AgentDefFacts(name)
	if err != nil {
		return err
	}
	if i, reason := policy.AgentDefTrust(facts, t, caller); i >= 0 {
		p := facts[i].Path
		above := !within(p, r.AgentControl(name)) && p != r.Path("agent", name)
		return &ForeignError{What: "agent " + name + " not started: another uid defined or may change it", Path: p, Reason: reason, Fix: foreignFix(p, t.TreeOwner, above)}
	}
	return nil
}

// CheckAgentHome refuses, with a *ForeignError, an existing home of agent
// name (uid) that ctx would adopt though another uid made it: what exists
// of home/UID/agent/NAME and its directories. A home that does not exist
// yet passes.
func (r Root) CheckAgentHome(uid int, name string) error {
	t, err := r.trustFacts()
	if err != nil {
		return err
	}
	home := r.AgentHome(uid, name)
	facts, missing, err := OwnerChain(r.Dir, home)
	if err != nil && !missing {
		return err
	}
	if !missing {
		for _, sub := range append([]string{"session"}, AgentHomeDirs...) {
			p := filepath.Join(home, sub)
			if info, err := os.Lstat(p); err == nil {
				facts = append(facts, ownerFacts(p, info))
			}
		}
	}
	if i, reason := policy.HomeTrust(facts, t, uint32(uid)); i >= 0 {
		p := facts[i].Path
		above := !within(p, r.Home(uid))
		return &ForeignError{What: "home of agent " + name + " not adopted: another uid made it", Path: p, Reason: reason, Fix: foreignFix(p, t.TreeOwner, above)}
	}
	return nil
}
