package hostcheck

import (
	"errors"
	"strings"
	"testing"
)

const statusFull = `Name:	agent
Umask:	0022
State:	R (running)
CapInh:	0000000000000000
CapPrm:	000001ffffffffff
CapEff:	000001ffffffffff
CapBnd:	000001ffffffffff
CapAmb:	0000000000000000
NoNewPrivs:	0
`

// Docker's default set: no NET_ADMIN, but NET_RAW (bit 13) everywhere.
const statusDockerDefault = `CapInh:	0000000000000000
CapPrm:	00000000a80425fb
CapEff:	00000000a80425fb
CapBnd:	00000000a80425fb
CapAmb:	0000000000000000
`

// Docker's default set with --cap-drop NET_RAW.
const statusNoNet = `CapInh:	0000000000000000
CapPrm:	00000000a80405fb
CapEff:	00000000a80405fb
CapBnd:	00000000a80405fb
CapAmb:	0000000000000000
`

func TestParseCapStatus(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    capSets
		wantErr string
	}{
		{"full root", statusFull, capSets{0x1ffffffffff, 0x1ffffffffff, 0x1ffffffffff}, ""},
		{"docker default", statusDockerDefault, capSets{0xa80425fb, 0xa80425fb, 0xa80425fb}, ""},
		{"no CapBnd", "CapEff:\t0\nCapPrm:\t0\n", capSets{}, "no CapBnd line"},
		{"empty", "", capSets{}, "no CapEff line"},
		{"bad hex", "CapEff:\tzz\nCapPrm:\t0\nCapBnd:\t0\n", capSets{}, `bad mask "zz"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCapStatus(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error got %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v, want %+v", got, err, tt.want)
			}
		})
	}
}

func TestHeld(t *testing.T) {
	tests := []struct {
		name string
		in   capSets
		want string
	}{
		{"none", capSets{}, ""},
		{"raw only in bounding", capSets{Bounding: 1 << capNetRaw}, "NET_RAW in bounding"},
		{"admin eff+prm", capSets{Effective: 1 << capNetAdmin, Permitted: 1 << capNetAdmin}, "NET_ADMIN in effective,permitted"},
		{"other caps ignored", capSets{Effective: ^uint64(0) &^ (1<<capNetRaw | 1<<capNetAdmin)}, ""},
		{"both", capSets{Permitted: 1<<capNetRaw | 1<<capNetAdmin}, "NET_RAW in permitted; NET_ADMIN in permitted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(tt.in.held(), "; "); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCheckCapabilitiesFakeRoot proves the check judges ROOT/proc/self/status
// alone when Root is not "/" (the test process itself runs as full root).
func TestCheckCapabilitiesFakeRoot(t *testing.T) {
	tests := []struct {
		name       string
		status     string
		wantOK     bool
		wantDetail string
	}{
		{"dropped", statusNoNet, true, "absent from effective, permitted and bounding sets (status)"},
		{"docker default keeps NET_RAW", statusDockerDefault, false, "NET_RAW in effective,permitted,bounding"},
		{"full root", statusFull, false, "NET_RAW in effective,permitted,bounding; NET_ADMIN in effective,permitted,bounding"},
		{"only bounding", "CapEff:\t0\nCapPrm:\t0\nCapBnd:\t1000\n", false, "NET_ADMIN in bounding"},
		{"garbled", "CapEff: x\n", false, "cannot read capabilities"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tree(t, map[string]string{"proc/self/status": tt.status})
			got := checkCapabilities(Config{Root: root}.withDefaults())
			if got.OK != tt.wantOK || !strings.Contains(got.Detail, tt.wantDetail) {
				t.Errorf("got %+v, want ok=%v detail containing %q", got, tt.wantOK, tt.wantDetail)
			}
			if strings.Contains(got.Detail, "capget") {
				t.Errorf("fake root used the live process: %q", got.Detail)
			}
		})
	}
	got := checkCapabilities(Config{Root: t.TempDir()}.withDefaults())
	if got.OK || !strings.Contains(got.Detail, "proc/self/status") {
		t.Errorf("missing status: got %+v, want a failure naming the file", got)
	}
}

// TestJudgeCaps proves the live capget source counts on its own: a
// capability it sees fails the check even when the status file says none.
func TestJudgeCaps(t *testing.T) {
	none := capSets{Effective: 0xa80405fb, Permitted: 0xa80405fb, Bounding: 0xa80405fb}
	raw := capSets{Bounding: 1 << capNetRaw}
	liveOf := func(c capSets, err error) func() (capSets, error) {
		return func() (capSets, error) { return c, err }
	}
	tests := []struct {
		name       string
		file       capSets
		fileErr    error
		live       func() (capSets, error)
		wantOK     bool
		wantDetail string
	}{
		{"both clean", none, nil, liveOf(capSets{}, nil), true, "(status+capget)"},
		{"file only", none, nil, nil, true, "(status)"},
		{"live holds what the file hides", none, nil, liveOf(raw, nil), false, "NET_RAW in bounding (note: status and capget disagree)"},
		{"file holds, live clean", raw, nil, liveOf(capSets{}, nil), false, "NET_RAW in bounding"},
		{"same finding once", raw, nil, liveOf(raw, nil), false, "NET_RAW in bounding"},
		{"live only", capSets{}, errors.New("open status: gone"), liveOf(capSets{}, nil), true, "(capget) (note: open status: gone)"},
		{"live fails, file clean", none, nil, liveOf(capSets{}, errors.New("capget: EPERM")), true, "(status) (note: capget: EPERM)"},
		{"nothing readable", capSets{}, errors.New("open status: gone"), liveOf(capSets{}, errors.New("capget: EPERM")), false, "cannot read capabilities: open status: gone; capget: EPERM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeCaps(tt.file, tt.fileErr, tt.live)
			if got.OK != tt.wantOK || !strings.Contains(got.Detail, tt.wantDetail) {
				t.Errorf("got %+v, want ok=%v detail containing %q", got, tt.wantOK, tt.wantDetail)
			}
			if tt.name == "same finding once" && got.Detail != "NET_RAW in bounding" {
				t.Errorf("got %q, want the finding once", got.Detail)
			}
		})
	}
}
