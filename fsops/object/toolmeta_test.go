package object

import (
	"strings"
	"testing"
)

func TestParseAnnotations(t *testing.T) {
	a, err := ParseAnnotations([]byte(`{"title":"Read file","readOnlyHint":true,"openWorldHint":false}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Title != "Read file" || a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint != nil {
		t.Fatalf("%+v", a)
	}
	// Explicit false survives the round trip; absent stays absent.
	if got := a.JSON(); got != `{"title":"Read file","readOnlyHint":true,"openWorldHint":false}` {
		t.Fatalf("JSON() = %s", got)
	}
	if a, err := ParseAnnotations([]byte("{}")); err != nil || !a.IsZero() {
		t.Fatalf("{}: %v %+v", err, a)
	}
	for in, want := range map[string]string{
		`[]`:                     "must be a JSON object",
		`{"readOnlyHint":"yes"}`: `field "readOnlyHint" must be true or false`,
		`{"readOnlyHint":null}`:  `field "readOnlyHint" must be true or false`,
		`{"readOnly":true}`:      `unknown field "readOnly"`,
		`{"title":""}`:           `"title" is empty`,
		`{"title":"a\nb"}`:       "one line",
		`{"title":1}`:            "title must be a string",
		`{"title":"` + strings.Repeat("x", 257) + `"}`: "longer than 256",
		`{"openWorldHint":true,"openWorldHint":false}`: `duplicate field "openWorldHint"`,
	} {
		_, err := ParseAnnotations([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	// ValidateControl is where install, ctx set, bootstrap and doctor meet it.
	if err := ValidateControl("tool", "annotations", []byte(`{"destructiveHint":true}`+"\n")); err != nil {
		t.Fatal(err)
	}
	if err := ValidateControl("tool", "annotations", []byte(`{"destructiveHint":1}`)); err == nil {
		t.Fatal("bad annotations accepted")
	}
}

func TestParseInputAndOutputSchema(t *testing.T) {
	for _, ok := range []string{"argv", "stdin\n"} {
		if err := ValidateControl("tool", "input", []byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "json", "argv\nstdin\n", " stdin"} {
		if err := ValidateControl("tool", "input", []byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := ValidateControl("tool", "output.schema", []byte(`{"type":"object","properties":{"sum":{"type":"number"}}}`)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"type":"array"}`, `{"properties":{}}`, `[]`, `{"type":"nope"}`} {
		if err := ValidateControl("tool", "output.schema", []byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func FuzzParseAnnotations(f *testing.F) {
	f.Add([]byte(`{"title":"Read file","readOnlyHint":true,"openWorldHint":false}`))
	f.Add([]byte(`{"destructiveHint":true,"idempotentHint":false}` + "\n"))
	f.Add([]byte(`{"title":"\u00e9<&>"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseAnnotations(data)
		if err != nil {
			return
		}
		// Whatever parses must survive its own encoding unchanged: serve
		// hands the encoding to clients.
		again, err := ParseAnnotations([]byte(a.JSON()))
		if err != nil || again.JSON() != a.JSON() {
			t.Fatalf("round trip: %v %s %s", err, again.JSON(), a.JSON())
		}
	})
}
