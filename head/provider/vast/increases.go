package vast

import (
	"context"
	"errors"
	"net/http"
)

// epPrice paces the price-increase calls on their own, 2 s apart
// (DefaultLimits).
const epPrice = "price_increase"

// PendingIncrease is one row of GET /api/v0/instances/pending-price-increases/
// (vast-cli vastai/api/price_increase.py): a host's higher price for one
// of the account's contracts (contract_id is the instance ID). Costs are
// per second, the GPU's per GPU and the disk's per GB (the CLI's table
// shows them × 3600 as "$/GPU/hr" and × 3600 × 24 × 30 as "$/GB/mo");
// absent ones null. ContractEnd is the contract's current end date (epoch
// seconds): the new rate applies only after it (the CLI's accept).
type PendingIncrease struct {
	ID          int64    `json:"pending_price_increase_id"`
	ContractID  int64    `json:"contract_id"`
	HostID      int64    `json:"host_id"`
	NewGPU      *float64 `json:"new_gpu_costpersec"`
	OldGPU      *float64 `json:"old_gpu_costpersec"`
	NewDiskRAM  *float64 `json:"new_disk_ram_costpersec"`
	OldDiskRAM  *float64 `json:"old_disk_ram_costpersec"`
	ContractEnd *float64 `json:"contract_end_date"`
}

// RiseDPH is how many $/hour the increase adds to a rental of gpus GPUs
// and diskGB of disk: (Δ GPU cost × GPUs + Δ disk cost × GB) × 3600, each
// Δ new less old per second (a cost absent on either side adds nothing).
// A rental of no GPU counts one (vast rents none; fakevast's CPU offers).
// Bandwidth and platform fees are not per hour and are left out.
func (r PendingIncrease) RiseDPH(gpus int, diskGB float64) float64 {
	d := func(n, o *float64) float64 {
		if n == nil || o == nil {
			return 0
		}
		return *n - *o
	}
	return (d(r.NewGPU, r.OldGPU)*float64(max(gpus, 1)) + d(r.NewDiskRAM, r.OldDiskRAM)*diskGB) * 3600
}

// PendingIncreases lists the account's pending price increases.
func (c *Client) PendingIncreases(ctx context.Context) ([]PendingIncrease, error) {
	var ans struct {
		Rows []PendingIncrease `json:"pending_price_increases"`
	}
	if err := c.do(ctx, call{op: "pending price increases", ep: epPrice, method: http.MethodGet,
		path: "/api/v0/instances/pending-price-increases/", out: &ans, pol: idempotent}); err != nil {
		return nil, err
	}
	return ans.Rows, nil
}

// ErrNoPending: the row is no longer pending (answered, or the contract
// gone): vast's 404 no_pending_price_increase (older: 409).
var ErrNoPending = errors.New("no pending price increase")

// AnswerIncrease accepts or rejects one pending row: PUT
// /api/v0/instances/accept-price-increase/ or reject-price-increase/ with
// exactly {"pending_price_increase_id": id} (vast refuses any other key).
func (c *Client) AnswerIncrease(ctx context.Context, id int64, accept bool) error {
	path, op := "/api/v0/instances/reject-price-increase/", "reject price increase"
	if accept {
		path, op = "/api/v0/instances/accept-price-increase/", "accept price increase"
	}
	var out struct{}
	err := c.do(ctx, call{op: op, ep: epPrice, method: http.MethodPut, path: path,
		body: map[string]int64{"pending_price_increase_id": id}, out: &out, pol: idempotent})
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusNotFound && ae.Code == "no_pending_price_increase" || ae.Status == http.StatusConflict) {
		return ErrNoPending
	}
	return err
}
