package vast

import (
	"context"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/fakeclock"
)

// TestPacerSpacesFromAnswers: a second request to one endpoint leaves the
// interval after the first one's answer (however long that took); another
// endpoint does not wait; a 429 adds the penalty and doubles.
func TestPacerSpacesFromAnswers(t *testing.T) {
	clk := fakeclock.New(time.Unix(1_800_000_000, 0))
	var slept []time.Duration
	p := NewPacer(DefaultLimits(), clk.Now, func(_ context.Context, d time.Duration) error { slept = append(slept, d); clk.Add(d); return nil })
	ctx := context.Background()
	done, _ := p.Wait(ctx, EpCreate)
	clk.Add(3 * time.Second) // the create took 3 s to answer
	done()
	done, _ = p.Wait(ctx, EpShow) // another endpoint: at once
	done()
	if len(slept) != 0 {
		t.Fatalf("slept %v before the first create and a show, want nothing", slept)
	}
	done, _ = p.Wait(ctx, EpCreate)
	if want := 4500*time.Millisecond + 90*time.Millisecond; len(slept) != 1 || slept[0] != want {
		t.Fatalf("second create slept %v, want %v after the first's answer", slept, want)
	}
	p.Limited(EpCreate)
	done()
	slept = nil
	done, _ = p.Wait(ctx, EpCreate)
	done()
	if want := 4590*time.Millisecond + 12*time.Second; len(slept) != 1 || slept[0] != want {
		t.Errorf("after a 429 slept %v, want interval + 12 s penalty %v", slept, want)
	}
	if s := p.Sent(); s[EpCreate] != 3 || s[EpShow] != 1 {
		t.Errorf("sent %v", s)
	}
}

// TestPacerOneInFlight: a request to an endpoint waits while another to it
// is unanswered; ctx ends the wait.
func TestPacerOneInFlight(t *testing.T) {
	p := NewPacer(Limits{}, time.Now, func(context.Context, time.Duration) error { return nil })
	done, _ := p.Wait(context.Background(), EpList)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(ctx, EpList); err == nil {
		t.Fatal("a second list went out while the first was unanswered")
	}
	done()
	if d, err := p.Wait(context.Background(), EpList); err != nil {
		t.Fatal(err)
	} else {
		d()
	}
}
