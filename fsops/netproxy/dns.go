package netproxy

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// The DNS stub answers the questions of a sandbox's resolver: an A
// question for a granted name gets the name's sandbox-local address, any
// other question for it an empty NOERROR (so an AAAA question makes the
// resolver fall back to the A answer, not fail the name), and every other
// name NXDOMAIN at once. It never forwards a question: a name is the only
// thing a lookup could carry out of the sandbox.

// DNS header flags and codes (RFC 1035 4.1.1).
const (
	dnsQR       = 1 << 15
	dnsAA       = 1 << 10
	dnsTC       = 1 << 9
	dnsRD       = 1 << 8
	dnsRA       = 1 << 7
	dnsFormErr  = 1
	dnsNXDomain = 3
	dnsNotImp   = 4
	dnsTypeA    = 1
	dnsTypeAAAA = 28
	dnsTypeOPT  = 41
	dnsClassIN  = 1
	dnsHeader   = 12
	// MaxDNSMessage bounds a question the stub reads: a question is at
	// most a header, a 255-byte name and an OPT record.
	MaxDNSMessage = 4096
)

// DNSQuery is a parsed question.
type DNSQuery struct {
	ID    uint16
	Flags uint16
	// Name is the question's name in lower case without the final dot,
	// when it is a host name (letters, digits, hyphens and underscores
	// in each label); HostName is false otherwise, and Name then shows
	// the name with other bytes escaped, for a message.
	Name     string
	HostName bool
	Type     uint16
	Class    uint16
	question []byte // the question as received, echoed in the answer
}

// dnsError is a query the stub answers with only a header carrying rcode
// (drop: no answer at all).
type dnsError struct {
	rcode int
	drop  bool
	msg   string
}

func (e *dnsError) Error() string { return e.msg }

func formErr(msg string) error { return &dnsError{rcode: dnsFormErr, msg: msg} }

// ParseDNSQuery parses a query strictly: a standard query (QR clear,
// opcode 0, TC clear) with one question, no answer or authority records,
// at most one additional record which must be an EDNS OPT with the root
// name, no compression in the question, and nothing after the records.
func ParseDNSQuery(msg []byte) (DNSQuery, error) {
	if len(msg) < dnsHeader {
		return DNSQuery{}, &dnsError{drop: true, msg: "shorter than a DNS header"}
	}
	if len(msg) > MaxDNSMessage {
		return DNSQuery{}, &dnsError{drop: true, msg: "longer than a question can be"}
	}
	q := DNSQuery{ID: binary.BigEndian.Uint16(msg), Flags: binary.BigEndian.Uint16(msg[2:])}
	qd, an, ns, ar := binary.BigEndian.Uint16(msg[4:]), binary.BigEndian.Uint16(msg[6:]), binary.BigEndian.Uint16(msg[8:]), binary.BigEndian.Uint16(msg[10:])
	switch {
	case q.Flags&dnsQR != 0:
		return q, &dnsError{drop: true, msg: "a response, not a query"}
	case (q.Flags>>11)&0xf != 0:
		return q, &dnsError{rcode: dnsNotImp, msg: "opcode " + strconv.Itoa(int(q.Flags>>11&0xf)) + " is not QUERY"}
	case q.Flags&dnsTC != 0:
		return q, formErr("a truncated query")
	case qd != 1 || an != 0 || ns != 0 || ar > 1:
		return q, formErr("not one question alone (with at most an OPT record)")
	}
	off, err := q.parseName(msg, dnsHeader)
	if err != nil {
		return q, err
	}
	if len(msg) < off+4 {
		return q, formErr("the question ends early")
	}
	q.Type, q.Class = binary.BigEndian.Uint16(msg[off:]), binary.BigEndian.Uint16(msg[off+2:])
	q.question = msg[dnsHeader : off+4]
	off += 4
	if ar == 1 {
		if off, err = skipOPT(msg, off); err != nil {
			return q, err
		}
	}
	if off != len(msg) {
		return q, formErr("bytes after the records")
	}
	return q, nil
}

// parseName reads the question's name at off, uncompressed, and returns
// the offset after it.
func (q *DNSQuery) parseName(msg []byte, off int) (int, error) {
	var b strings.Builder
	q.HostName = true
	wire := 0
	for {
		if off >= len(msg) {
			return 0, formErr("the name runs past the message")
		}
		n := int(msg[off])
		off++
		wire += n + 1
		switch {
		case n == 0:
			q.Name = b.String()
			if q.Name == "" {
				q.HostName = false
			}
			return off, nil
		case n&0xc0 != 0:
			return 0, formErr("a compressed or extended label in the question")
		case wire > 255:
			return 0, formErr("a name longer than 255 bytes")
		case off+n > len(msg):
			return 0, formErr("a label runs past the message")
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		for _, c := range msg[off : off+n] {
			switch {
			case 'A' <= c && c <= 'Z':
				b.WriteByte(c + 'a' - 'A')
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
				b.WriteByte(c)
			default:
				q.HostName = false
				b.WriteString(`\` + strconv.Itoa(int(c)))
			}
		}
		off += n
	}
}

// skipOPT checks the EDNS OPT record at off (root name, type 41) and
// returns the offset after it.
func skipOPT(msg []byte, off int) (int, error) {
	if len(msg) < off+11 || msg[off] != 0 || binary.BigEndian.Uint16(msg[off+1:]) != dnsTypeOPT {
		return 0, formErr("the additional record is not an EDNS OPT record")
	}
	rdlen := int(binary.BigEndian.Uint16(msg[off+9:]))
	off += 11
	if len(msg) < off+rdlen {
		return 0, formErr("the OPT record runs past the message")
	}
	return off + rdlen, nil
}

// DNSStub answers a sandbox's questions.
type DNSStub struct {
	// Answer gives a granted name's sandbox-local IPv4 address; false for
	// a name not granted. AddressBook.Answerer makes one.
	Answer func(name string) (netip.Addr, bool)
	// Refused, when set, is called for each question answered NXDOMAIN,
	// with the name (escaped when not a host name) and the type, so the
	// run host can say which grant would allow it.
	Refused func(name string, qtype uint16)
	TTL     uint32 // of an answer; default 60 s
}

// Respond answers one query message; nil means no answer is sent (a
// message too short to answer, or a response).
func (s *DNSStub) Respond(msg []byte) []byte {
	q, err := ParseDNSQuery(msg)
	if err != nil {
		var de *dnsError
		if !errors.As(err, &de) || de.drop {
			return nil
		}
		return dnsReply(q, de.rcode, nil, 0)
	}
	var addr netip.Addr
	granted := q.HostName && q.Class == dnsClassIN && s.Answer != nil
	if granted {
		addr, granted = s.Answer(q.Name)
	}
	if !granted {
		if s.Refused != nil {
			s.Refused(q.Name, q.Type)
		}
		return dnsReply(q, dnsNXDomain, nil, 0)
	}
	if q.Type == dnsTypeA && addr.Is4() {
		ttl := s.TTL
		if ttl == 0 {
			ttl = 60
		}
		a := addr.As4()
		return dnsReply(q, 0, a[:], ttl)
	}
	return dnsReply(q, 0, nil, 0)
}

// dnsReply builds the answer to q: its question echoed (for a header-only
// error reply, none), and an A record when a4 is set.
func dnsReply(q DNSQuery, rcode int, a4 []byte, ttl uint32) []byte {
	flags := dnsQR | dnsAA | dnsRA | q.Flags&(dnsRD|0xf<<11) | uint16(rcode)
	out := make([]byte, dnsHeader, dnsHeader+len(q.question)+16)
	binary.BigEndian.PutUint16(out, q.ID)
	binary.BigEndian.PutUint16(out[2:], flags)
	if q.question != nil {
		binary.BigEndian.PutUint16(out[4:], 1)
		out = append(out, q.question...)
	}
	if a4 != nil {
		binary.BigEndian.PutUint16(out[6:], 1)
		out = append(out, 0xc0, dnsHeader, 0, dnsTypeA, 0, dnsClassIN)
		out = binary.BigEndian.AppendUint32(out, ttl)
		out = append(out, 0, 4)
		out = append(out, a4...)
	}
	return out
}
