package netproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
)

// AddressBook gives names sandbox-local addresses and tells a connection's
// local address back as its name. Addresses come from one IPv4 prefix
// inside 127.0.0.0/8, in order, never 127.0.0.1 (the sandbox's own
// loopback services) nor the prefix's first and last addresses; a name
// keeps its address for the run. Its size is bounded, so a run that asks
// for ever new names below a granted wildcard exhausts its own book, not
// the run host.
type AddressBook struct {
	mu     sync.Mutex
	prefix netip.Prefix
	next   netip.Addr
	max    int
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
}

var loopback4 = netip.MustParsePrefix("127.0.0.0/8")

// localhost4 is the IPv4 address of localhost.
var localhost4 = netip.MustParseAddr("127.0.0.1")

// NewAddressBook makes a book over prefix (inside 127.0.0.0/8, at most
// /30) holding at most max names (0: as many as the prefix has).
func NewAddressBook(prefix netip.Prefix, max int) (*AddressBook, error) {
	prefix = prefix.Masked()
	if !prefix.Addr().Is4() || !loopback4.Contains(prefix.Addr()) || prefix.Bits() < 8 || prefix.Bits() > 30 {
		return nil, fmt.Errorf("address book prefix %s is not inside 127.0.0.0/8 with room for two addresses", prefix)
	}
	return &AddressBook{prefix: prefix, next: prefix.Addr().Next(), max: max,
		byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}}, nil
}

// ErrBookFull is Assign's error when the book has no address left.
var ErrBookFull = errors.New("address book full")

// Assign returns name's address, giving it the next free one the first
// time. name is folded to lower case and loses a final dot.
func (b *AddressBook) Assign(name string) (netip.Addr, error) {
	name = canonicalName(name)
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.byName[name]; ok {
		return a, nil
	}
	if b.max > 0 && len(b.byName) >= b.max {
		return netip.Addr{}, ErrBookFull
	}
	for b.next.IsValid() && b.prefix.Contains(b.next) {
		a := b.next
		b.next = a.Next()
		if !b.prefix.Contains(b.next) {
			break // the prefix's last address is never handed out
		}
		if _, taken := b.byAddr[a]; taken || a == localhost4 {
			continue
		}
		b.byName[name], b.byAddr[a] = a, name
		return a, nil
	}
	return netip.Addr{}, ErrBookFull
}

// Bind gives name a fixed address (any loopback address, 127.0.0.1
// included: "localhost" for localhost:PORT grants). An address or name
// bound already to another is an error.
func (b *AddressBook) Bind(name string, a netip.Addr) error {
	name = canonicalName(name)
	if !a.Is4() || !loopback4.Contains(a) {
		return fmt.Errorf("%s is not an IPv4 loopback address", a)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.byAddr[a]; ok && old != name {
		return fmt.Errorf("%s is bound to %s already", a, old)
	}
	if old, ok := b.byName[name]; ok && old != a {
		return fmt.Errorf("%s is bound to %s already", name, old)
	}
	b.byName[name], b.byAddr[a] = a, name
	return nil
}

// Name returns the name whose address a is.
func (b *AddressBook) Name(a netip.Addr) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	name, ok := b.byAddr[a.Unmap()]
	return name, ok
}

// Answerer returns a DNSStub.Answer: a name granted (as granted says;
// policy.NetworkGrants.NameGranted, live) gets its address from the book.
func (b *AddressBook) Answerer(granted func(name string) bool) func(string) (netip.Addr, bool) {
	return func(name string) (netip.Addr, bool) {
		if !granted(name) {
			return netip.Addr{}, false
		}
		a, err := b.Assign(name)
		return a, err == nil
	}
}

// canonicalName folds A-Z only (Unicode folding turns the Kelvin sign
// into k) and drops a final dot.
func canonicalName(name string) string {
	b := []byte(strings.TrimSuffix(name, "."))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
