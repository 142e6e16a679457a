package vast

import (
	"context"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// TestKeyScopeSaysOnceWhenTheKeyReadsBilling: a full key (it reads the
// account's invoices) gets one warning naming the scope the head needs; a
// key scoped as docs/vast.md shows gets none; neither stops renting.
func TestKeyScopeSaysOnceWhenTheKeyReadsBilling(t *testing.T) {
	for _, scoped := range []bool{false, true} {
		e := newEnvWith(t, fakevast.DefaultOffers(1), nil, func(c *fakevast.Config) { c.ScopedKey = scoped })
		p := e.provider(t, "c", nil)
		p.CheckKeyScope(context.Background())
		warned := strings.Count(e.logs.String(), "can do more than the head needs")
		if want := map[bool]int{false: 1, true: 0}[scoped]; warned != want {
			t.Errorf("scoped %v: %d warnings, want %d:\n%s", scoped, warned, want, e.logs.String())
		}
		if !scoped && !strings.Contains(e.logs.String(), Needed) {
			t.Errorf("the warning does not name the scope the head needs:\n%s", e.logs.String())
		}
		if _, err := p.Rent(context.Background(), rentReq("c1")); err != nil {
			t.Errorf("scoped %v: Rent after the probe: %v", scoped, err)
		}
		if strings.Contains(e.logs.String(), testKey) {
			t.Error("the log holds the vast key")
		}
	}
}
