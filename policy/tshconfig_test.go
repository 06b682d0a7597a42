package policy

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

func TestParseTshConfig(t *testing.T) {
	def := DefaultTshConfig()
	if def != (TshConfig{64, 32, 1}) {
		t.Fatalf("defaults = %+v", def)
	}
	ok := []struct {
		name, in string
		want     TshConfig
	}{
		{"empty", "", def},
		{"comments and blanks", "# tsh\n\n   \n\t# more\n", def},
		{"all keys", "max_loaded_tools=10\ncache_capacity=20\nwindow_percent=30\n", TshConfig{10, 20, 30}},
		{"reordered, no final newline", "window_percent=100\nmax_loaded_tools=1024", TshConfig{1024, 32, 100}},
		{"line blanks trimmed", "  cache_capacity=5\t\n", TshConfig{64, 5, 1}},
		{"CRLF", "cache_capacity=7\r\nwindow_percent=2\r\n", TshConfig{64, 7, 2}},
		{"minimums", "max_loaded_tools=1\ncache_capacity=1\nwindow_percent=1\n", TshConfig{1, 1, 1}},
		{"comment after blanks", "   # max_loaded_tools=x\n", def},
	}
	for _, tc := range ok {
		got, err := ParseTshConfig([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("%s: ParseTshConfig(%q) = %+v, %v; want %+v", tc.name, tc.in, got, err, tc.want)
		}
	}
	bad := []struct {
		in   string
		line int
		want string
	}{
		{"max_loaded_tools", 1, "not KEY=VALUE"},
		{"\n\nfoo=1\n", 3, `unknown key "foo"`},
		{"MAX_LOADED_TOOLS=1", 1, "unknown key"},
		{"max_loaded_tools=0", 1, "leading zero"},
		{"max_loaded_tools=064", 1, "leading zero"},
		{"max_loaded_tools=+64", 1, "not a positive decimal integer"},
		{"max_loaded_tools=-1", 1, "not a positive decimal integer"},
		{"max_loaded_tools=1.5", 1, "not a positive decimal integer"},
		{"max_loaded_tools=", 1, "empty value"},
		{"max_loaded_tools=1025", 1, "must be in 1..1024, not 1025"},
		{"cache_capacity=99999999999", 1, "too large"},
		{"window_percent=101", 1, "must be in 1..100"},
		{"max_loaded_tools = 64", 1, `no blanks around "="`},
		{"max_loaded_tools =64", 1, `no blanks around "="`},
		{"max_loaded_tools= 64", 1, `no blanks around "="`},
		{"max_loaded_tools=6 4", 1, "not a positive decimal integer"},
		{"cache_capacity=1\ncache_capacity=2\n", 2, "cache_capacity given twice (first on line 1)"},
		{"window_percent=1\x00", 1, "NUL byte"},
		{"export max_loaded_tools=1", 1, "unknown key"},
	}
	for _, tc := range bad {
		_, err := ParseTshConfig([]byte(tc.in))
		var se *ControlError
		if !errors.As(err, &se) {
			t.Errorf("ParseTshConfig(%q) err = %v, want *ControlError", tc.in, err)
			continue
		}
		if se.Line != tc.line || !strings.Contains(se.Error(), tc.want) {
			t.Errorf("ParseTshConfig(%q) = %q (line %d), want line %d containing %q", tc.in, se.Error(), se.Line, tc.line, tc.want)
		}
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("ParseTshConfig(%q): error does not unwrap to EINVAL", tc.in)
		}
	}
}

func TestTshConfigFormatRoundTrip(t *testing.T) {
	c := TshConfig{7, 8, 9}
	got := string(c.Format())
	want := "max_loaded_tools=7\ncache_capacity=8\nwindow_percent=9\n"
	if got != want {
		t.Fatalf("Format = %q, want %q", got, want)
	}
	back, err := ParseTshConfig([]byte(got))
	if err != nil || back != c {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
}

func TestTshSettingParse(t *testing.T) {
	s, ok := LookupTshSetting("window_percent")
	if !ok {
		t.Fatal("window_percent unknown")
	}
	if v, err := s.Parse("100"); v != 100 || err != nil {
		t.Errorf("Parse(100) = %d, %v", v, err)
	}
	for _, in := range []string{"0", "101", "1e2", "", "07"} {
		if _, err := s.Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
	if _, ok := LookupTshSetting("path"); ok {
		t.Error("path is not a setting")
	}
}

func FuzzTshConfig(f *testing.F) {
	f.Add([]byte("max_loaded_tools=64\ncache_capacity=32\nwindow_percent=1\n"))
	f.Add([]byte("# c\n\nwindow_percent=100\r\n"))
	f.Add([]byte("cache_capacity=0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseTshConfig(data)
		if err != nil {
			var se *ControlError
			if !errors.As(err, &se) || se.Line < 1 {
				t.Fatalf("error %v is not a ControlError with a line", err)
			}
			return
		}
		for _, s := range TshSettings {
			if v := s.Get(&c); v < s.Min || v > s.Max {
				t.Fatalf("%s=%d out of range", s.Key, v)
			}
		}
		back, err := ParseTshConfig(c.Format())
		if err != nil || back != c {
			t.Fatalf("normalized form does not round-trip: %+v, %v", back, err)
		}
	})
}
