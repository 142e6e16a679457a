package metrics

import (
	"strings"
	"testing"
)

// TestPortCheckGauges: /metrics shows the port check gate's limit, running
// checks and waiting enrollments when the head wires the gate in, and no
// such family when it does not.
func TestPortCheckGauges(t *testing.T) {
	m := &Metrics{PortChecks: func() (int, int, int) { return 24, 20, 300 }}
	var b strings.Builder
	if err := m.Write(&b, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE rayvast_port_checks gauge\n",
		`rayvast_port_checks{kind="limit"} 24` + "\n",
		`rayvast_port_checks{kind="running"} 20` + "\n",
		`rayvast_port_checks{kind="waiting"} 300` + "\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	(&Metrics{}).Write(&b, nil, nil)
	if strings.Contains(b.String(), "rayvast_port_checks") {
		t.Error("port check gauges without a gate")
	}
}
