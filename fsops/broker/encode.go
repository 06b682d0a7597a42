package broker

import "ctx/fsops"

// A caller's Request is written by hand, not by encoding/json: a tool
// run by path is a fresh process that sends one request, and
// encoding/json's first use (building its encoder for the type by
// reflection) cost that process more than the rest of its call's own
// work. The host decodes it with encoding/json as before; what is
// written is what encoding/json would decode to the same Request.

// appendJSON appends r's JSON to b; false when r has a field only
// encoding/json writes (a host operation, a join).
func (r *Request) appendJSON(b []byte) ([]byte, bool) {
	if r.HostOp != nil || r.Join != nil {
		return b, false
	}
	b = append(b, `{"tool":`...)
	b = fsops.AppendJSONString(b, r.Tool)
	b = append(b, `,"args":`...)
	b = appendStrings(b, r.Args)
	b = append(b, `,"env":`...)
	b = appendStrings(b, r.Env)
	b = append(b, `,"cwd":`...)
	b = fsops.AppendJSONString(b, r.Cwd)
	if r.Decide != nil {
		b = append(b, `,"decide":{`...)
		if r.Decide.Terminal {
			b = append(b, `"terminal":true`...)
		}
		b = append(b, '}')
	}
	if r.Secret != "" {
		b = append(b, `,"secret":`...)
		b = fsops.AppendJSONString(b, r.Secret)
	}
	return append(b, '}'), true
}

// sizeHint is about the length of r's JSON, which a buffer made once
// holds (each growth is a copy and fresh pages).
func (r *Request) sizeHint() int {
	n := 64 + len(r.Tool) + len(r.Cwd) + len(r.Secret)
	for _, s := range r.Args {
		n += len(s) + 3
	}
	for _, s := range r.Env {
		n += len(s) + 3
	}
	return n + n/16
}

// appendStrings appends ss as a JSON array (null when nil).
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = fsops.AppendJSONString(b, s)
	}
	return append(b, ']')
}
