package fakevast

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Contract terms (README: contract ends and price increases). An instance
// keeps its offer's end_date; past it vast stops the instance (it bills
// storage until destroyed). A host's price increase waits as a pending row
// (GET /api/v0/instances/pending-price-increases/) until the renter
// accepts (the new price holds) or rejects it (PUT
// .../accept-price-increase/ or .../reject-price-increase/ with exactly
// {"pending_price_increase_id": N}).

// increase is one pending price increase of an instance's host.
type increase struct {
	ID       int64
	Instance int64
	Host     int64
	Old, New float64 // $/hour
	Created  time.Time
	Answer   string // "", "accepted", "rejected"
}

// Increase is what tests read of a price increase.
type Increase struct {
	ID       int64
	Instance int64
	Answer   string
}

func endDate(in *Instance) any {
	if in.Offer.EndDate == 0 {
		return nil
	}
	return in.Offer.EndDate
}

// expired: the instance's contract ended (vast stops it then).
func (s *Server) expired(in *Instance) bool {
	return in.Offer.EndDate > 0 && float64(s.cfg.Now().UnixNano())/1e9 >= in.Offer.EndDate
}

// RaisePrice makes instance id's host ask newDPH ($/hour) from now on: a
// pending price increase, its row ID returned.
func (s *Server) RaisePrice(id int64, newDPH float64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok || in.Destroyed {
		return 0, fmt.Errorf("fakevast raise price %d: no such instance", id)
	}
	s.nextInc++
	inc := &increase{ID: 7000 + s.nextInc, Instance: id, Host: in.Offer.HostID, Old: in.DPH, New: newDPH, Created: s.cfg.Now()}
	s.increases = append(s.increases, inc)
	return inc.ID, nil
}

// Increases lists every price increase and its answer.
func (s *Server) Increases() []Increase {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Increase, 0, len(s.increases))
	for _, inc := range s.increases {
		out = append(out, Increase{ID: inc.ID, Instance: inc.Instance, Answer: inc.Answer})
	}
	return out
}

// pendingIncreases answers the envelope vast-cli's price_increase.py
// documents; costs per second of the whole instance (the fake's reading),
// disk costs null.
func (s *Server) pendingIncreases(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rows := []map[string]any{}
	for _, inc := range s.increases {
		in := s.instances[inc.Instance]
		if inc.Answer != "" || in == nil || in.Destroyed {
			continue
		}
		rows = append(rows, map[string]any{
			"pending_price_increase_id": inc.ID, "contract_id": inc.Instance, "host_id": inc.Host,
			"new_gpu_costpersec": inc.New / 3600, "old_gpu_costpersec": inc.Old / 3600,
			"new_disk_ram_costpersec": nil, "old_disk_ram_costpersec": nil,
			"contract_end_date": endDate(in), "ask_end_date": endDate(in), "created_at": float64(inc.Created.UnixNano()) / 1e9,
		})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "count": len(rows), "truncated": false, "pending_price_increases": rows})
}

// answerIncrease accepts or rejects one pending row; any other key in the
// body is 400 (the backend forbids extras), a row not pending 404
// no_pending_price_increase.
func (s *Server) answerIncrease(accept bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID *int64 `json:"pending_price_increase_id"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || body.ID == nil {
			fail(w, http.StatusBadRequest, "invalid_args", `body: want exactly {"pending_price_increase_id": N}`)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, inc := range s.increases {
			in := s.instances[inc.Instance]
			if inc.ID != *body.ID || inc.Answer != "" || in == nil || in.Destroyed {
				continue
			}
			inc.Answer = "rejected"
			if accept {
				inc.Answer, in.DPH = "accepted", inc.New
			}
			writeJSON(w, http.StatusOK, map[string]any{"success": true, "pending_price_increase_id": inc.ID, "contract_id": inc.Instance})
			return
		}
		fail(w, http.StatusNotFound, "no_pending_price_increase", "no pending price increase by that id")
	}
}
