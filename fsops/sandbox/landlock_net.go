package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock's network rules (ABI 4): a ruleset that handles TCP bind and
// connect denies both but where a port rule allows one. x/sys names
// neither the rule type nor its attribute.

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT.
const landlockRuleNetPort = 2

// landlockNetPortAttr is struct landlock_net_port_attr.
type landlockNetPortAttr struct {
	allowedAccess uint64
	port          uint64
}

// landlockAllowConnect lets the domain connect over TCP to port, on any
// address (a rule names a port only), and bind nothing.
func landlockAllowConnect(rulesetFD int, port uint16) error {
	attr := landlockNetPortAttr{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD),
		landlockRuleNetPort, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	runtime.KeepAlive(&attr)
	if errno != 0 {
		return fmt.Errorf("landlock rule tcp connect %d: %w", port, errno)
	}
	return nil
}
