package mcpstdio

import (
	"crypto/sha256"
	"encoding/json"
	"time"
)

// notifications/tools/list_changed: the served tool set is polled and
// compared with what the client last listed.

// fingerprint identifies a tool set as the client sees it: everything
// tools/list sends, in order.
func fingerprint(tools []ServedTool) string {
	b, _ := json.Marshal(tools)
	sum := sha256.Sum256(b)
	return string(sum[:])
}

// noteListed records the set just sent to the client.
func (s *server) noteListed(tools []ServedTool) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	s.sent, s.announced = fingerprint(tools), ""
	for _, t := range tools {
		s.listed[t.Name] = true
	}
}

// compare announces a tool set that differs from the one the client was
// last sent, once per change.
func (s *server) compare(tools []ServedTool) {
	s.lmu.Lock()
	listedOnce := s.sent != ""
	s.lmu.Unlock()
	if !listedOnce {
		return // nothing to compare with
	}
	fp := s.fingerprintOf(tools)
	s.lmu.Lock()
	changed := fp != s.sent && fp != s.announced
	if changed {
		s.announced = fp
	}
	s.lmu.Unlock()
	if changed {
		s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
	}
}

func (s *server) poll(stop chan struct{}) {
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.lmu.Lock()
		listedOnce := s.sent != ""
		s.lmu.Unlock()
		if !listedOnce {
			continue
		}
		if tools, err := s.h.Tools(); err == nil {
			s.compare(tools)
		}
	}
}

// fingerprintOf is fingerprint(tools), kept for the last set: a handler
// that finds its listing unchanged returns the same slice, which is never
// modified once returned.
func (s *server) fingerprintOf(tools []ServedTool) string {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if len(tools) > 0 && len(tools) == len(s.fpTools) && &tools[0] == &s.fpTools[0] {
		return s.fp
	}
	s.fpTools, s.fp = tools, fingerprint(tools)
	return s.fp
}
