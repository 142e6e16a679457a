package config

import (
	"strings"
	"testing"
)

func withProvider(block string) string {
	return strings.Replace(good, `"cluster":"c"`, `"cluster":"c",`+block, 1)
}

func TestProviderGood(t *testing.T) {
	for _, block := range []string{
		`"provider":{"kind":"none"}`,
		`"provider":{"kind":"none","private_network":true}`,
		`"provider":{"kind":"docker","image":"rayvast-candidate:x"}`,
		`"provider":{"kind":"docker","hairpin":true,"per_ip":2}`,
		`"provider":{"kind":"vast","image":"rayproject/ray:2.53.0-gpu","disk_gb":32,"base_url":"https://console.vast.ai",
		  "api_key_file":"/etc/rayvast/vast_key","node_types":{"gpu1":{"gpu_name":"RTX 4090","max_dph":0.5}}},"max_dph_total":2`,
		`"provider":{"kind":"vast","reliability2":0.99,"verified":false,"cuda_max_good":12.4,"inet_down":500,"inet_up":200,
		  "datacenter":true,"geolocation":["US","CA"],"search":{"gpu_ram":{"gte":24000},"cpu_arch":{"in":["amd64"]}},
		  "node_types":{"gpu1":{"reliability2":0.9,"search":{"static_ip":{"eq":true}}}}}`,
		`"provider":{"kind":"vast","replace_before_end_s":0,"price_increase_max_dph":0.6,
		  "node_types":{"gpu1":{"interruptible":{"max_bid_dph":0.3,"margin":0.1}}}},"max_dph_total":2`,
	} {
		c, err := Parse(strings.NewReader(withProvider(block)))
		if err != nil {
			t.Errorf("%s: %v", block, err)
			continue
		}
		if c.Provider == nil || c.Provider.Kind == "" {
			t.Errorf("%s: provider not kept: %+v", block, c.Provider)
		}
	}
}

func TestProviderRefuses(t *testing.T) {
	for _, c := range []struct{ name, block, want string }{
		{"no kind", `"provider":{"image":"x"}`, "provider.kind: missing"},
		{"unknown kind", `"provider":{"kind":"aws"}`, `provider.kind: "aws"`},
		{"api key in config", `"provider":{"kind":"vast","api_key":"k"}`, "unknown field"},
		{"vast settings on docker", `"provider":{"kind":"docker","node_types":{"gpu1":{}}}`, "vast settings"},
		{"hairpin on vast", `"provider":{"kind":"vast","hairpin":true}`, "docker provider's local network"},
		{"negative per_ip", `"provider":{"kind":"docker","per_ip":-1}`, "provider.per_ip"},
		{"image on none", `"provider":{"kind":"none","image":"x"}`, "kind none"},
		{"private_network on vast", `"provider":{"kind":"vast","private_network":true}`, "not yours to call private"},
		{"bad base url", `"provider":{"kind":"vast","base_url":"console.vast.ai"}`, "provider.base_url"},
		{"unknown node type", `"provider":{"kind":"vast","node_types":{"gpu9":{}}}`, "provider.node_types.gpu9"},
		{"negative max_dph", `"provider":{"kind":"vast","node_types":{"gpu1":{"max_dph":-1}}}`, "must not be negative"},
		{"negative disk", `"provider":{"kind":"vast","disk_gb":-1}`, "provider.disk_gb"},
		{"negative total", `"max_dph_total":-1`, "max_dph_total"},
		{"reliability above 1", `"provider":{"kind":"vast","reliability2":1.5}`, "provider.reliability2"},
		{"lower-case country", `"provider":{"kind":"vast","geolocation":["us"]}`, "provider.geolocation"},
		{"search: unknown operator", `"provider":{"kind":"vast","search":{"gpu_ram":{"ge":24000}}}`, `search.gpu_ram: operator "ge"`},
		{"search: unknown field", `"provider":{"kind":"vast","search":{"gpu_rams":{"gte":24000}}}`, "search.gpu_rams: not a field"},
		{"search: a field rayvast sets", `"provider":{"kind":"vast","search":{"num_gpus":{"eq":2}}}`, "search.num_gpus: set by rayvast"},
		{"search: a named filter", `"provider":{"kind":"vast","search":{"reliability2":{"gte":0.9}}}`, "use reliability2"},
		{"search: in wants a list", `"provider":{"kind":"vast","search":{"cpu_arch":{"in":"amd64"}}}`, "in: want a non-empty list"},
		{"search: eq wants one value", `"provider":{"kind":"vast","search":{"cpu_arch":{"eq":["amd64"]}}}`, "eq: want one"},
		{"search on a node type", `"provider":{"kind":"vast","node_types":{"gpu1":{"search":{"x":{"eq":1}}}}}`, "provider.node_types.gpu1.search.x"},
		{"gpu_name twice", `"provider":{"kind":"vast","search":{"gpu_name":{"in":["RTX 4090"]}},"node_types":{"gpu1":{"gpu_name":"RTX 3090"}}}`, "gpu_name and search.gpu_name both set"},
		{"filters on docker", `"provider":{"kind":"docker","inet_down":10}`, "offer filters are vast settings"},
		{"bid without cap", `"provider":{"kind":"vast","node_types":{"gpu1":{"interruptible":{"margin":0.1}}}}`, "provider.node_types.gpu1.interruptible.max_bid_dph"},
		{"bid margin above 1", `"provider":{"kind":"vast","node_types":{"gpu1":{"interruptible":{"max_bid_dph":1,"margin":2}}}}`, "interruptible.margin"},
		{"bid and max_dph", `"provider":{"kind":"vast","node_types":{"gpu1":{"max_dph":1,"interruptible":{"max_bid_dph":1}}}}`, "max_dph and interruptible both set"},
		{"bid above total", `"provider":{"kind":"vast","node_types":{"gpu1":{"interruptible":{"max_bid_dph":3}}}},"max_dph_total":2`, "no such bid"},
		{"negative lead", `"provider":{"kind":"vast","replace_before_end_s":-1}`, "provider.replace_before_end_s"},
		{"negative price cap", `"provider":{"kind":"vast","price_increase_max_dph":-1}`, "provider.price_increase_max_dph"},
		{"contract settings on docker", `"provider":{"kind":"docker","price_increase_max_dph":1}`, "vast settings"},
		{"max_dph above total", `"provider":{"kind":"vast","node_types":{"gpu1":{"max_dph":3}}},"max_dph_total":2`, "above max_dph_total"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(withProvider(c.block)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}
