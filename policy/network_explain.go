package policy

import (
	"fmt"
	"strings"
)

// networkPolicy is the agent-policy layer for a network object: allowed
// when a rule names the object as written, or when the agent's network
// grants cover everything the object stands for (a wildcard covers the
// names below it, a rule without a port covers :80 and :443, default
// covers all). The egress proxy decides each connection the same way
// (NetworkGrants.Decide), and refuses on top of it a name that resolves
// to a loopback or private address; explain does not resolve names.
func networkPolicy(a *Agent, obj Object, perm Permission) Verdict {
	if vd := agentPolicy(a, obj, perm); vd.Allowed {
		return vd
	}
	r := Rule{a.Subject, obj, perm}
	t, err := ParseNetworkTarget(obj.Name)
	if err != nil {
		return Verdict{LayerAgentPolicy, false, fmt.Sprintf("no rule %q in agent/%s.d/policy", r, a.Name)}
	}
	rules, ok := NetworkGrantsOf(a.Policy, a.Subject).Covers(t)
	if !ok {
		return Verdict{LayerAgentPolicy, false, fmt.Sprintf("no rule %q in agent/%s.d/policy, nor one that covers it", r, a.Name)}
	}
	quoted := make([]string, len(rules))
	for i, rule := range rules {
		quoted[i] = fmt.Sprintf("%q", rule)
	}
	return Verdict{LayerAgentPolicy, true, fmt.Sprintf("agent/%s.d/policy has %s, which covers %s", a.Name, strings.Join(quoted, " and "), describeTarget(t))}
}

// describeTarget words what a network object stands for.
func describeTarget(t NetworkTarget) string {
	var host string
	switch t.Kind {
	case NetworkWildcard:
		host = "every name below " + t.Host
	case NetworkLocalhost:
		host = "the host's loopback"
	default:
		host = t.Host
		if t.Kind == NetworkAddress && t.Addr.Is6() {
			host = "[" + host + "]"
		}
	}
	if t.Port == 0 {
		return host + " on ports 80 and 443"
	}
	return fmt.Sprintf("%s on port %d", host, t.Port)
}
