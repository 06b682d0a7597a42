package runhost

import (
	"errors"
	"fmt"

	"ctx/applets/egress"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/fsops/netproxy"
	"ctx/fsops/sandbox"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// A run's network by name (DESIGN §17): a run without network:default
// gets the run host as its egress proxy (applets/egress), lent what the
// run host decides and records with: the broker's policy generation, room
// in the audit for each connection's record, the run's events and stderr.

// prepareNetwork sets up the run's egress when it has one: a run without
// network:default in a network namespace (named grants or none: the stub
// answers at once either way), or in iso landlock and iso shared with
// named grants. It sets the proxy variables and returns the lines
// /mnt/proc/policy has about it.
func (r *AgentRun) prepareNetwork(network bool) ([]string, error) {
	g := r.Agent.NetworkGrants()
	var mode egress.Mode
	switch {
	case network:
		return nil, nil
	case r.iso == policy.IsoUserns || r.iso == policy.IsoUID:
		mode = egress.Namespace
	case len(g.Targets()) == 0:
		return nil, nil // nothing to reach: no socket but unix ones (seccomp)
	case r.iso == policy.IsoShared:
		mode = egress.Shared
	case landlockNet():
		mode = egress.Landlock
	default:
		// iso landlock without Landlock's network rules: nothing would
		// hold the run to the proxy's port, so no network at all.
		return []string{"sandbox network refused: Landlock below ABI 4 cannot hold TCP to the egress proxy's port; no network, as without grants"}, nil
	}
	limits := r.budgets.limits
	budget := netproxy.Budget{Bytes: int64(min(limitOrZero(limits.Get("net_bytes")), 1<<62)),
		Connections: int64(min(limitOrZero(limits.Get("net_connections")), 1<<62))}
	run, err := egress.Open(mode, g, budget, egress.Host{Root: r.Root, Agent: r.Agent.Name, Generation: r.policyGeneration,
		Reserve: r.reserveConnection, Record: r.record, Warnf: r.warnf, BudgetExceeded: r.budgetExceeded, Listen: r.orderListen,
		Changed: func() {
			if r.broker != nil {
				r.broker.refreshSoon()
			}
		}})
	if err != nil {
		return nil, err
	}
	r.net = run
	r.env = sandboxplan.ProxyEnv(r.env, run.Egress().Proxy)
	return run.Lines(), nil
}

// orderListen asks the init, on the broker's private order channel, for a
// forwarder's listener at addr (a port granted during the run); readInit
// hands its answer to the egress.
func (r *AgentRun) orderListen(id uint64, addr string) error {
	if r.broker == nil {
		return errors.New("no order channel to the sandbox's init")
	}
	return broker.Send(int(r.broker.host.Fd()), broker.Order{Op: broker.OpListen, ID: id, Path: addr}, nil)
}

// policyGeneration is the broker's count of the policy changes its watch
// saw, and whether one holds.
func (r *AgentRun) policyGeneration() (uint64, bool) {
	if r.broker == nil {
		return 0, false
	}
	return r.broker.policyGeneration()
}

// reserveConnection reserves room for one more connection's record, on
// top of the tool calls and connections in flight: a connection is not
// made unrecorded.
func (r *AgentRun) reserveConnection() error {
	if r.logSpent() {
		return fmt.Errorf("%v: connections are not made unrecorded", errLogBudget)
	}
	var inFlight int64
	if r.net != nil {
		inFlight = r.net.InFlight()
	}
	if r.broker != nil {
		inFlight += r.broker.inFlight.Load()
	}
	for _, t := range r.recordTargets(fsops.Event{Type: "net.connect"}) {
		if err := fsops.ReserveAppend(t.path, recordReserve*(inFlight+1)); err != nil && !notOurs(t, err) {
			err = fmt.Errorf("%s: %v", t.role, errnoOf(err))
			r.auditState(err)
			return fmt.Errorf("the audit cannot be written (%v): connections are not made unrecorded", err)
		}
	}
	return nil
}

// closeNetwork ends the run's egress, its last records written before
// the run's end is.
func (r *AgentRun) closeNetwork() {
	if r.net != nil {
		r.net.Close()
	}
}

// landlockNet reports whether this kernel's Landlock has TCP rules (ABI
// 4), which iso landlock's egress depends on.
func landlockNet() bool {
	abi, _ := sandbox.LandlockABI()
	return abi >= sandbox.LandlockABINet
}
