// Package netproxy is the mechanism of network by name (DESIGN §17): the
// run host as egress proxy for one run. It decides nothing itself. Every
// destination is put to a Decide function the run host supplies (over the
// agent's live policy: policy.NetworkGrants.Decide, adapted), and every
// connection ends in one Record the run host writes as a net.connect
// event. It imports no policy and no applet, so it can be tested alone.
//
// How the run host is meant to use it, for a run with named network
// grants (network:HOST connect) and no network:default:
//
//   - The sandbox gets a network namespace with only loopback, as without
//     grants. The init binds there, on loopback, the proxy's listener
//     (127.0.0.1:3128), the DNS stub's sockets and the forwarders', and
//     hands them once to the run host on the egress channel
//     (listeners.go: SendListeners, ReceiveListeners); the run host
//     accepts on them itself and calls Proxy.ServeConn for each proxy
//     connection, which tells an HTTP proxy request (CONNECT, or an
//     absolute http:// URI) from SOCKS5 by the first byte. The program
//     gets HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (socks5h://, so names, not
//     addresses, reach the proxy) and NO_PROXY (localhost,127.0.0.1,::1),
//     upper and lower case.
//   - Names are resolved on the host through Config.Resolver (a
//     *net.Resolver), and the address dialled is the address checked: a
//     name that resolves to a loopback, private, link-local, CGNAT,
//     unspecified or multicast address is refused unless the decision
//     says its grant names that target (Decision.Local: localhost:PORT, an
//     address, default) or the address itself is granted (Decide is asked
//     again for the address). DNS answers that change between check and
//     dial change nothing: the dial is to the checked address.
//   - For programs that ignore the proxy variables, the sandbox's
//     resolv.conf points at a DNSStub the run host serves on the sockets
//     the init bound (UDP and TCP port 53 on a loopback address). It answers a granted name (AddressBook with
//     policy.NetworkGrants.NameGranted) with a sandbox-local 127.x.y.z
//     from the run's AddressBook, and every other name NXDOMAIN at once,
//     calling Refused so the run host can print the grant that would allow
//     it on the run's stderr. The init listens on the wildcard address of
//     every port a name is granted on (policy.NetworkGrants.Ports) and
//     hands those listeners over as above; the run host calls
//     Proxy.ServeForward for each connection, which maps the
//     connection's local address back to the name. localhost:PORT grants
//     are the init listening on 127.0.0.1:PORT, bound in the book to the
//     name "localhost".
//   - When the agent's policy changes (the run host watches it), the run
//     host recompiles its grants and calls Proxy.Revalidate: open relays
//     whose grant no longer holds are closed at once, and the next
//     connection is decided on the new policy anyway.
//   - Budgets: Config.Budget carries net_bytes and net_connections; the
//     relay refuses past them and says which budget was spent. Records
//     carry bytes each way and the duration at close.
//
// In iso landlock (no network namespace) the run host listens on the
// host's loopback itself and Landlock's TCP rules let the agent connect
// to that port only; the DNS stub and forwarders need a namespace and are
// not used. TLS is never terminated: the proxy sees the names clients
// ask for, never content.
package netproxy
