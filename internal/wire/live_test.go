package wire

import "testing"

// TestLive: every candidate state is decided; only ended and
// destroy_requested are not live (a new state fails here until decided).
func TestLive(t *testing.T) {
	want := map[string]bool{StatePending: true, StateRented: true, StateRunning: true, StateEnrolled: true, StateLost: true,
		StateEnded: false, StateDestroyRequested: false}
	for state, live := range want {
		if Live(state) != live {
			t.Errorf("Live(%q) = %v, want %v", state, !live, live)
		}
	}
}
