package fakevast

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// filterOffers applies vast's search query: {"field": {"op": value}} with
// ops eq, neq, gt, gte, lt, lte, in, notin; "order" [[field, asc|desc]],
// "limit" n and "type" ("bid": only offers with a min_bid). Unknown
// fields are ignored, as a permissive server would.
func filterOffers(offers []Offer, q map[string]json.RawMessage) ([]Offer, error) {
	var out []Offer
	for _, o := range bidOnly(offers, q) {
		ok, err := matches(o, q)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, o)
		}
	}
	if raw, ok := q["order"]; ok {
		var order [][]string
		if err := json.Unmarshal(raw, &order); err != nil {
			return nil, fmt.Errorf("order: want [[field, dir]]")
		}
		for i := len(order) - 1; i >= 0; i-- {
			if len(order[i]) == 0 {
				continue
			}
			f, desc := order[i][0], len(order[i]) > 1 && order[i][1] == "desc"
			sort.SliceStable(out, func(a, b int) bool {
				x, y := num(field(out[a], f)), num(field(out[b], f))
				if desc {
					return x > y
				}
				return x < y
			})
		}
	}
	if raw, ok := q["limit"]; ok {
		var n int
		if err := json.Unmarshal(raw, &n); err == nil && n > 0 && n < len(out) {
			out = out[:n]
		}
	}
	if out == nil {
		out = []Offer{}
	}
	return out, nil
}

func field(o Offer, name string) any {
	switch name {
	case "id":
		return float64(o.ID)
	case "machine_id":
		return float64(o.MachineID)
	case "host_id":
		return float64(o.HostID)
	case "gpu_name":
		return o.GPUName
	case "num_gpus":
		return float64(o.NumGPUs)
	case "dph_total":
		return o.DPHTotal
	case "min_bid":
		return o.MinBid
	case "end_date":
		return o.EndDate
	case "verified":
		return o.Verified
	case "rentable":
		return o.Rentable
	case "rented":
		return o.Rented
	case "external":
		return o.External
	case "direct_port_count":
		return float64(o.DirectPortCount)
	case "reliability2":
		return o.Reliability2
	case "cuda_max_good":
		return o.CUDAMaxGood
	case "inet_down":
		return o.InetDown
	case "inet_up":
		return o.InetUp
	case "datacenter":
		return o.Datacenter
	case "geolocation":
		return o.Geolocation
	}
	return nil
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func matches(o Offer, q map[string]json.RawMessage) (bool, error) {
	for name, raw := range q {
		switch name {
		case "order", "limit", "type", "disable_bundling", "allocated_storage":
			continue
		}
		have := field(o, name)
		if have == nil {
			continue
		}
		var ops map[string]any
		if err := json.Unmarshal(raw, &ops); err != nil {
			return false, fmt.Errorf("%s: want {\"op\": value}", name)
		}
		for op, want := range ops {
			ok, err := compare(have, op, want)
			if err != nil {
				return false, fmt.Errorf("%s: %w", name, err)
			}
			if !ok {
				return false, nil
			}
		}
	}
	return true, nil
}

// coerce reads a filter value as the type of the field: the CLI sends
// numbers as strings ("dph_total": {"lt": "0.12"}) and vast compares them
// as numbers.
func coerce(have, want any) (any, error) {
	str, ok := want.(string)
	if !ok {
		return want, nil
	}
	switch have.(type) {
	case float64:
		f, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", str)
		}
		return f, nil
	case bool:
		switch str {
		case "true", "True":
			return true, nil
		case "false", "False":
			return false, nil
		}
		return nil, fmt.Errorf("%q is not a boolean", str)
	}
	return want, nil
}

func compare(have any, op string, want any) (bool, error) {
	if list, ok := want.([]any); ok {
		for i := range list {
			v, err := coerce(have, list[i])
			if err != nil {
				return false, err
			}
			list[i] = v
		}
	} else {
		v, err := coerce(have, want)
		if err != nil {
			return false, err
		}
		want = v
	}
	switch op {
	case "eq":
		return have == want, nil
	case "neq":
		return have != want, nil
	case "in", "notin":
		list, ok := want.([]any)
		if !ok {
			return false, fmt.Errorf("%s wants a list", op)
		}
		found := false
		for _, w := range list {
			found = found || w == have
		}
		return found == (op == "in"), nil
	case "gt", "gte", "lt", "lte":
		h, ok1 := have.(float64)
		w, ok2 := want.(float64)
		if !ok1 || !ok2 {
			return false, fmt.Errorf("%s wants numbers", op)
		}
		switch op {
		case "gt":
			return h > w, nil
		case "gte":
			return h >= w, nil
		case "lt":
			return h < w, nil
		}
		return h <= w, nil
	}
	return false, fmt.Errorf("unknown operator %q", op)
}
