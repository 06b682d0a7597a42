package egress

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"ctx/fsops"
	"ctx/fsops/netproxy"
	"ctx/policy"
)

// The proxy's decisions and records: each destination is decided on the
// agent's policy as the run host reads it now, room for an allowed
// connection's record is reserved before it is made (as a tool call's is),
// every connection is one net.connect event, and a refusal says on the
// run's standard error which grant would allow it.

// LayerAudit refuses a connection whose record cannot be written.
const LayerAudit = "audit"

// decide is the proxy's Decide: the policy's decision, and for an allowed
// connection room reserved for its record.
func (n *Run) decide(host string, port int) netproxy.Decision {
	d := n.currentGrants().Decide(host, port)
	dec := netproxy.Decision{Allowed: d.Allowed, Rule: d.Rule, Layer: string(d.Layer), Reason: d.Reason, Local: d.Local, Fix: n.fix(d.Rule)}
	if !d.Allowed {
		return dec
	}
	if err := n.h.Reserve(); err != nil {
		return netproxy.Decision{Layer: LayerAudit, Reason: err.Error()}
	}
	return dec
}

// fix is the command that adds rule ("allow SUBJECT network:T connect")
// to the agent's policy.
func (n *Run) fix(rule string) string {
	rest, ok := strings.CutPrefix(rule, "allow ")
	if !ok || !strings.Contains(rest, " network:") {
		return ""
	}
	return "ctx policy allow" + n.h.Root.Option() + " --in agent/" + n.h.Agent + ".d/policy " + rest
}

// nameGranted is the DNS stub's question: does a grant cover the name.
func (n *Run) nameGranted(name string) bool {
	_, ok := n.currentGrants().NameGranted(name)
	return ok
}

// dnsRefused says on the run's standard error which grant would let the
// stub answer a name it answered NXDOMAIN.
func (n *Run) dnsRefused(name string, _ uint16) {
	d := n.currentGrants().Decide(name, 443)
	if d.Layer != policy.LayerAgentPolicy || d.Rule == "" {
		return // not a name a grant can name (one label, an address...)
	}
	if n.warn.allow("dns " + name) {
		n.h.Warnf("%s: network: no grant for the name %s (answered NXDOMAIN); to allow it: %s", n.h.Agent, name, n.fix(d.Rule))
	}
}

// report records one connection as a net.connect event and, for a
// refusal, says on the run's standard error what would allow it.
func (n *Run) report(rec netproxy.Record) {
	target := "-"
	if rec.Host != "" {
		target = net.JoinHostPort(rec.Host, strconv.Itoa(rec.Port))
	}
	detail := "via=" + rec.Via
	if rec.Addr.IsValid() {
		detail += " addr=" + rec.Addr.String()
	}
	detail += " up=" + strconv.FormatInt(rec.BytesUp, 10) + " down=" + strconv.FormatInt(rec.BytesDown, 10)
	if rec.Rule != "" {
		detail += " rule=" + strconv.Quote(rec.Rule)
	}
	if rec.Reason != "" {
		detail += " reason=" + strconv.Quote(rec.Reason)
	}
	n.h.Record(fsops.Event{Type: "net.connect", Object: "network:" + target, Layer: rec.Layer,
		DurMS: float64(rec.Duration.Microseconds()) / 1000, Status: Status(rec), Detail: detail}, rec.Relayed)
	switch rec.Layer {
	case string(policy.LayerAgentPolicy), netproxy.LayerAddress, netproxy.LayerRevoked:
		if fix := n.fix(rec.Rule); fix != "" && n.warn.allow(rec.Layer+" "+target) {
			n.h.Warnf("%s: network: refused %s (%s); to allow it: %s", n.h.Agent, target, rec.Reason, fix)
		}
	case netproxy.LayerBudget:
		for _, key := range []string{"net_bytes", "net_connections"} {
			if strings.Contains(rec.Reason, key+" ") {
				n.h.BudgetExceeded(key, "the egress proxy refuses further connections")
			}
		}
	}
}

// Status is a connection's event status: ok for a relay that ended by
// itself or was open when the run ended (layer closed: a keep-alive
// connection the program left open is not a cancelled one, and whether
// its server hung up first is a race the status must not show), denied
// for a refusal (a rule, an address, a budget, a revoked grant, the
// audit), cancelled for a connection the run ended before it was made,
// else error.
func Status(rec netproxy.Record) string {
	switch rec.Layer {
	case "":
		if rec.Relayed {
			return "ok"
		}
		return "error"
	case string(policy.LayerAgentPolicy), string(policy.LayerRequest), netproxy.LayerAddress,
		netproxy.LayerBudget, netproxy.LayerRevoked, LayerAudit:
		return "denied"
	case netproxy.LayerClosed:
		if rec.Relayed {
			return "ok"
		}
		return "cancelled"
	}
	return "error"
}

// revalidateOnKick closes the open relays a policy change took the grant
// of, and has the ports it granted forwarded (forwards.go): at once when the run host tells of a change (PolicyChanged), and
// at each revalidatePoll when its generation moved without a word or no
// watch holds (one could not be made: the user's inotify instances are
// few), until the run's egress is closed.
func (n *Run) revalidateOnKick() {
	tick := time.NewTicker(revalidatePoll)
	defer tick.Stop()
	var seen uint64
	for {
		select {
		case <-n.kick:
		case <-tick.C:
			gen, watched := n.h.Generation()
			if watched && gen == seen {
				continue
			}
			seen = gen
		case <-n.done:
			return
		}
		n.proxy.Revalidate()
		n.growForwards()
	}
}

// revalidatePoll is how often open relays are decided again when no word
// of a change came.
const revalidatePoll = 250 * time.Millisecond

// PolicyChanged is the run host's news of a change to the tree: the open
// relays are decided again, at once.
func (n *Run) PolicyChanged() {
	if n == nil {
		return
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// refusalWarner rate-limits the refusal lines on the run's standard
// error: one per destination in refusalRepeat, at most refusalBurst in
// any refusalWindow.
type refusalWarner struct {
	mu     sync.Mutex
	last   map[string]time.Time
	window time.Time
	count  int
}

const (
	refusalRepeat = 30 * time.Second
	refusalWindow = 10 * time.Second
	refusalBurst  = 10
	refusalKeys   = 1024 // destinations remembered
)

func (w *refusalWarner) allow(key string) bool {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.last[key]; ok && now.Sub(t) < refusalRepeat {
		return false
	}
	if now.Sub(w.window) > refusalWindow {
		w.window, w.count = now, 0
	}
	if w.count >= refusalBurst {
		return false
	}
	w.count++
	if w.last == nil || len(w.last) >= refusalKeys {
		w.last = map[string]time.Time{}
	}
	w.last[key] = now
	return true
}
