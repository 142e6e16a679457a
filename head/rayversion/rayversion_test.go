package rayversion

import (
	"slices"
	"testing"
)

func TestParts(t *testing.T) {
	for _, c := range []struct {
		v    string
		want []int
	}{
		{"2.53.0", []int{2, 53, 0}},
		{"2.53.0rc1", []int{2, 53, 0}},
		{"3.11.7+local", []int{3, 11, 7}},
		{"3.0.0.dev0", []int{3, 0, 0}},
		{"2", []int{2}},
		{"", nil},
		{"ray", nil},
		{"1234567890.1", nil}, // over 9 digits: no number
	} {
		got, ok := Parts(c.v)
		if !slices.Equal(got, c.want) || ok != (c.want != nil) {
			t.Errorf("Parts(%q) = %v, %v; want %v", c.v, got, ok, c.want)
		}
	}
}

func TestAtFloor(t *testing.T) {
	for _, c := range []struct {
		v  string
		ok bool
	}{
		{"2.52.0", true}, {"2.52.0rc1", true}, {"2.53.0", true}, {"3.0.0.dev0", true}, {"2.52", true},
		{"2.51.2", false}, {"2.9.3", false}, {"1.99.0", false}, {"2", false}, {"", false}, {"0.0.0+fakeray", false},
	} {
		if got := AtFloor(c.v); got != c.ok {
			t.Errorf("AtFloor(%q) = %v, want %v", c.v, got, c.ok)
		}
	}
}

func TestPythonMatches(t *testing.T) {
	for _, c := range []struct {
		got, want string
		ok        bool
	}{
		{"3.11.7", "3.11", true}, {"3.11.7", "3.11.7", true}, {"3.11.7", "3", true},
		{"3.12.1", "3.11", false}, {"3.11.6", "3.11.7", false},
		{"3.11", "3.11.7", false}, // fewer parts than wanted
		{"", "3.11", false},
		{"3.1.0", "3.11", false}, // numbers, not prefixes
	} {
		if got := PythonMatches(c.got, c.want); got != c.ok {
			t.Errorf("PythonMatches(%q, %q) = %v, want %v", c.got, c.want, got, c.ok)
		}
	}
}
