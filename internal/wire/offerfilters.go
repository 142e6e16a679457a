package wire

import (
	"fmt"
	"sort"
	"strings"
)

// SearchOps are the operators vast's offer search accepts.
var SearchOps = []string{"eq", "neq", "gt", "gte", "lt", "lte", "in", "notin"}

// SearchFields are the offer fields vast's search filters on (the CLI's
// offers_fields and the API reference's search body), minus those rayvast
// sets itself (SearchOwned) and those OfferFilters names.
var SearchFields = []string{
	"bw_nvlink", "cluster_id", "compute_cap", "cpu_arch", "cpu_cores", "cpu_cores_effective", "cpu_ghz", "cpu_ram",
	"disk_bw", "disk_space", "dlperf", "dlperf_per_dphtotal", "driver_version", "duration", "flops_per_dphtotal",
	"gpu_arch", "gpu_display_active", "gpu_frac", "gpu_max_power", "gpu_max_temp", "gpu_mem_bw", "gpu_name", "gpu_ram",
	"gpu_total_ram", "has_avx", "inet_down_cost", "inet_up_cost", "min_bid", "mobo_name", "os_version", "pci_gen",
	"pcie_bw", "reliability", "static_ip", "storage_cost", "total_flops", "ubuntu_version", "verification", "vms_enabled",
}

// SearchOwned are the search fields rayvast sets from the config; the
// value says where to set them instead.
var SearchOwned = map[string]string{
	"num_gpus": "node_types.*.gpus", "dph_total": "max_dph or max_dph_total", "direct_port_count": "(64, always)",
	"rentable": "(true, always)", "rented": "(false, always)", "external": "(false, always)",
	"host_id": "(the blocklist)", "machine_id": "(the blocklist and live rentals)", "id": "(the offer picked)",
	"order": "(cheapest first)", "type": "(on-demand)", "limit": "(rayvast's)", "allocated_storage": "disk_gb",
	"reliability2": "reliability2", "verified": "verified", "cuda_max_good": "cuda_max_good",
	"inet_down": "inet_down", "inet_up": "inet_up", "datacenter": "datacenter", "geolocation": "geolocation",
}

// Check refuses filters vast would misread: values out of range, and
// search entries on unknown or rayvast's own fields, with unknown
// operators, or a list where one value is wanted (and the reverse).
func (f OfferFilters) Check() error {
	if f.Reliability2 != nil && (*f.Reliability2 < 0 || *f.Reliability2 > 1) {
		return fmt.Errorf("reliability2: %g, want 0-1", *f.Reliability2)
	}
	for name, v := range map[string]*float64{"cuda_max_good": f.CUDAMaxGood, "inet_down": f.InetDown, "inet_up": f.InetUp} {
		if v != nil && *v < 0 {
			return fmt.Errorf("%s: must not be negative", name)
		}
	}
	for _, g := range f.Geolocation {
		if len(g) != 2 || strings.ToUpper(g) != g {
			return fmt.Errorf("geolocation: %q, want two-letter country codes (\"US\")", g)
		}
	}
	fields := make([]string, 0, len(f.Search))
	for k := range f.Search {
		fields = append(fields, k)
	}
	sort.Strings(fields)
	for _, k := range fields {
		if err := checkSearch(k, f.Search[k]); err != nil {
			return fmt.Errorf("search.%s: %w", k, err)
		}
	}
	return nil
}

func checkSearch(field string, ops map[string]any) error {
	if where, owned := SearchOwned[field]; owned {
		return fmt.Errorf("set by rayvast; use %s", where)
	}
	known := false
	for _, k := range SearchFields {
		known = known || k == field
	}
	if !known {
		return fmt.Errorf("not a field of vast's offer search")
	}
	if len(ops) == 0 {
		return fmt.Errorf("no operator; want {\"op\": value}, op one of %s", strings.Join(SearchOps, " "))
	}
	for op, v := range ops {
		switch op {
		case "in", "notin":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return fmt.Errorf("%s: want a non-empty list", op)
			}
			for _, x := range list {
				if !scalar(x) {
					return fmt.Errorf("%s: list items must be strings, numbers or booleans", op)
				}
			}
		case "eq", "neq", "gt", "gte", "lt", "lte":
			if !scalar(v) {
				return fmt.Errorf("%s: want one string, number or boolean", op)
			}
		default:
			return fmt.Errorf("operator %q: want one of %s", op, strings.Join(SearchOps, " "))
		}
	}
	return nil
}

// Empty reports whether no filter is set.
func (f OfferFilters) Empty() bool {
	return f.Reliability2 == nil && f.Verified == nil && f.CUDAMaxGood == nil && f.InetDown == nil && f.InetUp == nil &&
		f.Datacenter == nil && len(f.Geolocation) == 0 && len(f.Search) == 0
}

func scalar(v any) bool {
	switch v.(type) {
	case string, float64, bool:
		return true
	}
	return false
}
