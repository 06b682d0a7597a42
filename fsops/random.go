package fsops

import "golang.org/x/sys/unix"

// RandomBytes fills b from the kernel's entropy pool (getrandom(2)). It is
// used instead of crypto/rand, whose package initialisation (a DRBG and its
// self-tests) every applet start of this multicall binary would pay.
func RandomBytes(b []byte) error {
	for len(b) > 0 {
		n, err := unix.Getrandom(b, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
