package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"ctx/applets/cli"
)

func TestContentNote(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}`:                          "[image: image/png, 8 bytes]",
		`{"type":"audio","data":"not base64!","mimeType":"audio/wav"}`:                           "[audio: audio/wav, 11 bytes]",
		`{"type":"resource","resource":{"uri":"file:///a","mimeType":"text/plain","text":"hi"}}`: "[resource: file:///a, text/plain, 2 bytes of text]",
		`{"type":"resource","resource":{"uri":"file:///b","blob":"AAEC"}}`:                       "[resource: file:///b, 3 bytes]",
		`{"type":"resource"}`: "[resource]",
		`{"type":"resource_link","uri":"file:///R","name":"R","mimeType":"text/markdown"}`: "[resource link: R (file:///R), text/markdown]",
		`{"type":"resource_link","uri":"file:///R"}`:                                       "[resource link: (file:///R)]",
		`{"type":"hologram"}`: `[block of type "hologram"]`,
	} {
		if got := contentNote(json.RawMessage(in)); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

// FuzzContentNote: whatever block a server sends, CLI mode prints one
// terminal-safe line for it.
func FuzzContentNote(f *testing.F) {
	f.Add([]byte(`{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}`))
	f.Add([]byte(`{"type":"resource_link","uri":"file:///x\n\u001b[2J","name":"a\nb"}`))
	f.Add([]byte(`{"type":"resource","resource":{"text":"x"}}`))
	f.Fuzz(func(t *testing.T, block []byte) {
		line := cli.Escape(contentNote(block))
		if strings.ContainsAny(line, "\n\r\x1b") {
			t.Fatalf("%s: note %q is not one safe line", block, line)
		}
	})
}
