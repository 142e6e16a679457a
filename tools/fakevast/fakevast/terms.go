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

// Rates as vast's price-increase rows carry them (vast-cli
// vastai/cli/commands/price_increase.py, whose table shows
// *_gpu_costpersec × 3600 as "$/GPU/hr" and *_disk_ram_costpersec × 3600 ×
// 24 × 30 as "$/GB/mo"): per GPU and per GB of disk, per second.
const (
	secPerHour  = 3600
	secPerMonth = 3600 * 24 * 30
)

// Rise is a host's new price for one contract: GPUDPH in $/GPU/hour and
// DiskGBMonth in $/GB/month (0: the disk price unchanged, its row's new
// disk cost null); AskEnd is the end date (epoch seconds) of the
// extension it offers (0: the contract's own).
type Rise struct {
	GPUDPH      float64
	DiskGBMonth float64
	AskEnd      float64
}

// increase is one pending price increase of an instance's host.
type increase struct {
	ID       int64
	Instance int64
	Host     int64
	OldGPU   float64 // $/GPU/s
	OldDisk  float64 // $/GB/s
	Rise     Rise
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

// gpus is the instance's GPU count for its GPU rate: vast rents no machine
// without a GPU; the fake's CPU offers (num_gpus 0) count as one.
func gpus(in *Instance) float64 { return float64(max(in.Offer.NumGPUs, 1)) }

// rates are the instance's GPU rate ($/GPU/s) and disk rate ($/GB/s): the
// disk at the offer's storage_cost, the rest of its $/hour the GPUs'.
func rates(in *Instance) (gpu, disk float64) {
	disk = in.Offer.StorageCost / secPerMonth
	return (in.DPH - disk*in.Disk*secPerHour) / gpus(in) / secPerHour, disk
}

// dphNow is what the instance costs now: an accepted increase applies
// only after the contract's end date at the time of the answer
// (price_increase.py's accept: "the new rate applies only after each
// contract's current end_date"); before, the old price.
func (s *Server) dphNow(in *Instance) float64 {
	if in.NewDPH > 0 && !s.cfg.Now().Before(in.NewFrom) {
		return in.NewDPH
	}
	return in.DPH
}

// RaisePrice makes instance id's host ask the rates of r for an extension
// of its contract: a pending price increase, its row ID returned.
func (s *Server) RaisePrice(id int64, r Rise) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok || in.Destroyed {
		return 0, fmt.Errorf("fakevast raise price %d: no such instance", id)
	}
	s.nextInc++
	gpu, disk := rates(in)
	inc := &increase{ID: 7000 + s.nextInc, Instance: id, Host: in.Offer.HostID, OldGPU: gpu, OldDisk: disk, Rise: r, Created: s.cfg.Now()}
	s.increases = append(s.increases, inc)
	return inc.ID, nil
}

// newDPH is the instance's $/hour at the increase's rates: GPU rate × GPUs
// plus disk rate × GB.
func (inc *increase) newDPH(in *Instance) float64 {
	disk := inc.OldDisk * secPerMonth
	if inc.Rise.DiskGBMonth > 0 {
		disk = inc.Rise.DiskGBMonth
	}
	return inc.Rise.GPUDPH*gpus(in) + disk/secPerMonth*secPerHour*in.Disk
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
// documents: costs per second, the GPU's per GPU and the disk's per GB (the
// CLI's table units); a disk price left unchanged is null on the new side
// ("the backend did not change the resource on this row").
func (s *Server) pendingIncreases(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rows := []map[string]any{}
	for _, inc := range s.increases {
		in := s.instances[inc.Instance]
		if inc.Answer != "" || in == nil || in.Destroyed {
			continue
		}
		var newDisk, askEnd any = nil, endDate(in)
		if inc.Rise.DiskGBMonth > 0 {
			newDisk = inc.Rise.DiskGBMonth / secPerMonth
		}
		if inc.Rise.AskEnd > 0 {
			askEnd = inc.Rise.AskEnd
		}
		rows = append(rows, map[string]any{
			"pending_price_increase_id": inc.ID, "contract_id": inc.Instance, "host_id": inc.Host,
			"new_gpu_costpersec": inc.Rise.GPUDPH / secPerHour, "old_gpu_costpersec": inc.OldGPU,
			"new_disk_ram_costpersec": newDisk, "old_disk_ram_costpersec": inc.OldDisk,
			"contract_end_date": endDate(in), "ask_end_date": askEnd, "created_at": float64(inc.Created.UnixNano()) / 1e9,
		})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "count": len(rows), "truncated": false, "pending_price_increases": rows})
}

// answerIncrease accepts or rejects one pending row; any other key in the
// body is 400 (the backend forbids extras), a row not pending 404
// no_pending_price_increase. Accepted: the contract is extended to
// ask_end_date at the new price, which applies from its current end date
// on (at once when it has none: the fake's choice); rejected: nothing
// changes, the contract ends at its end date ("no cutover follows").
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
				inc.Answer, in.NewDPH, in.NewFrom = "accepted", inc.newDPH(in), s.cfg.Now()
				if in.Offer.EndDate > 0 {
					in.NewFrom = time.Unix(0, int64(in.Offer.EndDate*1e9))
				}
				if inc.Rise.AskEnd > 0 {
					in.Offer.EndDate = inc.Rise.AskEnd
				}
			}
			writeJSON(w, http.StatusOK, map[string]any{"success": true, "pending_price_increase_id": inc.ID, "contract_id": inc.Instance})
			return
		}
		fail(w, http.StatusNotFound, "no_pending_price_increase", "no pending price increase by that id")
	}
}
