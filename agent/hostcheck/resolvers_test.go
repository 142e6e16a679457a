package hostcheck

import (
	"slices"
	"strings"
	"testing"
)

func TestParseResolvers(t *testing.T) {
	got, err := ParseResolvers(" opendns@127.0.0.2:5353, google@[::1]:53,cloudflare@1.2.3.4:53")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, r := range got {
		s = append(s, r.String())
	}
	want := []string{"opendns@127.0.0.2:5353", "google@[::1]:53", "cloudflare@1.2.3.4:53"}
	if !slices.Equal(s, want) {
		t.Errorf("got %v, want %v", s, want)
	}
}

// TestParseResolversErrors proves bad input is refused with a message that
// names the item and what is wrong with it.
func TestParseResolversErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty list"},
		{"  ", "empty list"},
		{"quad9@9.9.9.9:53", `unknown kind "quad9"`},
		{"opendns@1.2.3.4", "missing port"},
		{"opendns@1.2.3.4:", "missing port"},
		{"opendns@[::1]", "missing port"},
		{"opendns@::1:53", "IPv6 address needs brackets"},
		{"opendns@resolver1.opendns.com:53", `bad IP "resolver1.opendns.com"`},
		{"opendns@1.2.3:53", `bad IP "1.2.3"`},
		{"opendns@1.2.3.4:dns", `bad port "dns"`},
		{"opendns@1.2.3.4:0", `bad port "0"`},
		{"opendns@1.2.3.4:70000", `bad port "70000"`},
		{"1.2.3.4:53", "want kind@ip:port"},
		{"opendns@1.2.3.4:53,", `resolver 2 "": empty item`},
		{"opendns@[fe80::1%eth0]:53", "bad IP"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseResolvers(tt.in)
			if err == nil {
				t.Fatalf("got %v, want error containing %q", got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error got %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestDefaultResolversRoundTrip keeps the production defaults parseable and
// public: the env var format can express them.
func TestDefaultResolversRoundTrip(t *testing.T) {
	var s []string
	for _, r := range DefaultResolvers {
		s = append(s, r.String())
	}
	got, err := ParseResolvers(strings.Join(s, ","))
	if err != nil || !slices.Equal(got, DefaultResolvers) {
		t.Errorf("round trip got %v, %v, want %v", got, err, DefaultResolvers)
	}
	if len(DefaultResolvers) != 3 {
		t.Errorf("got %d default resolvers, want one per kind", len(DefaultResolvers))
	}
}
