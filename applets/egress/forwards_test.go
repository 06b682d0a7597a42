package egress

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"ctx/fsops/netproxy"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// forwardRun is a namespace run whose grants are those of lines (read as
// the policy is now: the generation never moves), its start planned from
// start, with Listen recording each order and the warnings kept.
type forwardRun struct {
	*Run
	mu     sync.Mutex
	orders map[uint64]string
	warned []string
}

func grantsOf(t *testing.T, lines ...string) *policy.NetworkGrants {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("allow a_t network:" + l + " connect\n")
	}
	p, err := policy.ParsePolicy([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return policy.NetworkGrantsOf(p, "a_t")
}

func newForwardRun(t *testing.T, start *policy.NetworkGrants) *forwardRun {
	f := &forwardRun{orders: map[uint64]string{}}
	n := &Run{mode: Namespace, grants: start, grantsGen: 1, kick: make(chan struct{}, 1), done: make(chan struct{}),
		listeners: &netproxy.Listeners{}}
	n.proxy = netproxy.New(netproxy.Config{Decide: n.decide})
	n.egress, n.skipped = sandboxplan.NamespaceEgress(start)
	n.h = Host{Agent: "a", Generation: func() (uint64, bool) { return 1, true },
		Warnf: func(format string, args ...any) {
			f.mu.Lock()
			f.warned = append(f.warned, fmt.Sprintf(format, args...))
			f.mu.Unlock()
		},
		Listen: func(id uint64, addr string) error {
			f.mu.Lock()
			f.orders[id] = addr
			f.mu.Unlock()
			return nil
		}}
	f.Run = n
	t.Cleanup(n.Close)
	return f
}

// grant makes lines the run's grants as the policy is now and lets the
// run act on the change.
func (f *forwardRun) grant(t *testing.T, lines ...string) {
	f.grantsMu.Lock()
	f.grants = grantsOf(t, lines...)
	f.grantsMu.Unlock()
	f.growForwards()
}

func (f *forwardRun) asked() map[uint64]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[uint64]string{}
	for id, a := range f.orders {
		m[id] = a
		delete(f.orders, id)
	}
	return m
}

// TestForwardsGrantedDuringRunAreBounded: a policy granting ports past
// the bound gets forwarders asked for up to MaxEgressForwards in all,
// counting the start's, each port once; the rest are said once, and a
// later change asks for nothing again.
func TestForwardsGrantedDuringRunAreBounded(t *testing.T) {
	f := newForwardRun(t, grantsOf(t, "api.example.test:7000"))
	f.startForwards(nil)
	if got := f.asked(); len(got) != 0 {
		t.Fatalf("asked before any change: %v", got)
	}
	var lines []string
	for p := 10000; p < 10000+2*sandboxplan.MaxEgressForwards; p++ {
		lines = append(lines, fmt.Sprintf("api.example.test:%d", p))
	}
	f.grant(t, append(lines, "api.example.test:7000", "api.example.test:53", "api.example.test:3128")...)
	got := f.asked()
	if len(got) != sandboxplan.MaxEgressForwards-1 {
		t.Fatalf("asked for %d forwarders, the start held 1 of %d", len(got), sandboxplan.MaxEgressForwards)
	}
	for _, addr := range got {
		if sandboxplan.ValidForward(addr) != nil || !strings.HasPrefix(addr, "0.0.0.0:") || addr == "0.0.0.0:7000" {
			t.Fatalf("asked for %s", addr)
		}
	}
	f.grant(t, append(lines, "other.example.test:9999")...)
	if got := f.asked(); len(got) != 0 {
		t.Fatalf("asked again past the bound: %v", got)
	}
	f.mu.Lock()
	warned := strings.Join(f.warned, "\n")
	f.mu.Unlock()
	if !strings.Contains(warned, "no forwarder at 0.0.0.0:3128: the proxy's port") ||
		!strings.Contains(warned, fmt.Sprintf("more than %d forwarded ports", sandboxplan.MaxEgressForwards)) {
		t.Fatalf("warnings:\n%s", warned)
	}
}

// TestForwardAnswers: the init's listener is served at the address asked
// for; an answer to no order, or a listener at another address, is
// closed and serves nothing; a refusal is said.
func TestForwardAnswers(t *testing.T) {
	f := newForwardRun(t, grantsOf(t, "localhost:7100"))
	local, err := net.Listen("tcp4", "127.0.0.1:7100")
	if err != nil {
		t.Skip(err)
	}
	f.startForwards([]net.Listener{local})
	// a name at the port of the localhost grant: the wildcard address
	// replaces the 127.0.0.1 forwarder, whose listener is closed first
	f.grant(t, "localhost:7100", "api.example.test:7100", "api.example.test:7101")
	got := f.asked()
	var ids []uint64
	for id, addr := range got {
		ids = append(ids, id)
		if addr != "0.0.0.0:7100" && addr != "0.0.0.0:7101" {
			t.Fatalf("asked for %s", addr)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("asked %v", got)
	}
	if _, err := local.Accept(); err == nil {
		t.Fatal("the 127.0.0.1 forwarder still listens")
	}
	stray := listenerFile(t, "127.0.0.1:0")
	f.Listened(999, "", []*os.File{stray})
	wrong := listenerFile(t, "127.0.0.1:0")
	var wrongID, refusedID uint64 = ids[0], ids[1]
	f.Listened(wrongID, "", []*os.File{wrong})
	f.Listened(refusedID, "address already in use", nil)
	f.mu.Lock()
	warned := strings.Join(f.warned, "\n")
	f.mu.Unlock()
	if !strings.Contains(warned, "the init listened at 127.0.0.1:") || !strings.Contains(warned, ": address already in use (reached through the proxy variables only)") {
		t.Fatalf("warnings:\n%s", warned)
	}
	if len(f.listeners.Forward) != 0 {
		t.Fatalf("served %d listeners", len(f.listeners.Forward))
	}
}

// listenerFile is a listening socket's descriptor, as the init sends it.
func listenerFile(t *testing.T, addr string) *os.File {
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	return file
}
