package authority

import (
	"sync"

	"ctx/fsops"
	"ctx/policy"
)

// Agents is one reading of a tree's agents for a decision that reads
// several of them from parts that run side by side: a start reads the
// agent itself, every agent for the trust rule and the agent's
// ancestors for its budgets. Each agent is loaded once, by whichever part
// asks first (the others wait for that load), so the whole start decides
// on one reading of each agent's controls instead of reading them up to
// three times. Safe for concurrent use; the agents it returns are shared
// and must not be changed.
type Agents struct {
	root  fsops.Root
	mu    sync.Mutex
	loads map[string]*agentLoad
}

type agentLoad struct {
	once sync.Once
	a    *policy.Agent
	err  error
}

// NewAgents returns a reading of root's agents that starts with those
// already loaded (the agent a start was asked for).
func NewAgents(root fsops.Root, loaded ...*policy.Agent) *Agents {
	s := &Agents{root: root, loads: map[string]*agentLoad{}}
	for _, a := range loaded {
		l := &agentLoad{a: a}
		l.once.Do(func() {})
		s.loads[a.Name] = l
	}
	return s
}

// Load is LoadAgent, once per name.
func (s *Agents) Load(name string) (*policy.Agent, error) {
	s.mu.Lock()
	l := s.loads[name]
	if l == nil {
		l = &agentLoad{}
		s.loads[name] = l
	}
	s.mu.Unlock()
	l.once.Do(func() { l.a, l.err = LoadAgent(s.root, name) })
	return l.a, l.err
}

// TrustedToolDirs is TrustedToolDirs with the trust rule's agents taken
// from this reading.
func (s *Agents) TrustedToolDirs(a *policy.Agent) ToolPath {
	return loadTrust(s.root, s.Load).Filter(a.Path, ToolDirs(s.root, a))
}

// Root is the tree this reading is of.
func (s *Agents) Root() fsops.Root { return s.root }
