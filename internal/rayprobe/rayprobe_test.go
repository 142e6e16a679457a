package rayprobe

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in      string
		ray, py string
		ok      bool
	}{
		{"\nRAYVAST-VERSIONS 2.53.0 3.11.7\n", "2.53.0", "3.11.7", true},
		{"noise\nRAYVAST-VERSIONS - 3.12.1\n", "", "3.12.1", true},
		{"RAYVAST-VERSIONS 1 2\nRAYVAST-VERSIONS 2.52.0 3.10.0\r\n", "2.52.0", "3.10.0", true},
		{"RAYVAST-VERSIONS 2.53.0\n", "", "", false},
		{"nothing\n", "", "", false},
		{"RAYVAST-VERSIONS 2.53.0;rm 3.11\n", "", "3.11", true},
	} {
		v, ok := Parse(c.in)
		if v.Ray != c.ray || v.Python != c.py || ok != c.ok {
			t.Errorf("Parse(%q) = %+v %v, want %q %q %v", c.in, v, ok, c.ray, c.py, c.ok)
		}
	}
}
