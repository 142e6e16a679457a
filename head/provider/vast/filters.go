package vast

import (
	"regexp"
	"strconv"

	"github.com/rayvast/rayvast/internal/wire"
)

// Default offer filters (docs/vast.md: the filters and their defaults): they
// keep out machines that drop off (reliability2), unverified ones,
// drivers older than the image's CUDA, and links too slow to pull a Ray
// image.
const (
	DefaultReliability2 = 0.98
	DefaultInetDown     = 100.0 // vast's unit (its reference says MB/s, its CLI prints Mb/s)
	DefaultInetUp       = 100.0
	// DefaultCUDA is the host driver's CUDA floor for an image whose tag
	// names none (Ray's GPU images are tagged -cuXYZ; "-gpu" aliases one).
	DefaultCUDA = 12.1
)

// cudaTag finds Ray's "-cuXYZ" in an image tag: cu121 is CUDA 12.1.
var cudaTag = regexp.MustCompile(`-cu(\d\d)(\d)(?:$|[^0-9])`)

// ImageCUDA is the CUDA version an image's tag names, else DefaultCUDA.
func ImageCUDA(image string) float64 {
	if v, ok := TagCUDA(image); ok {
		return v
	}
	return DefaultCUDA
}

// TagCUDA is the CUDA version an image's tag names (-cu128: 12.8); false
// when it names none.
func TagCUDA(image string) (float64, bool) {
	m := cudaTag.FindStringSubmatch(image)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1]+"."+m[2], 64)
	return v, err == nil
}

// filters merges a node type's offer filters over the provider block's
// over the defaults, field by field; search fields merge by name.
func (p *Provider) filters(nodeType, image string) Filters {
	return NodeFilters(p.cfg.Settings, nodeType, image)
}

// NodeFilters is the offer filters of nodeType renting image under s (what
// Rent searches with; `head image-check` judges an image's CUDA by it).
func NodeFilters(s Settings, nodeType, image string) Filters {
	top, own := s.OfferFilters, s.NodeTypes[nodeType].OfferFilters
	f := Filters{Reliability2: DefaultReliability2, Verified: true, CUDAMaxGood: ImageCUDA(image),
		InetDown: DefaultInetDown, InetUp: DefaultInetUp}
	for _, o := range []wire.OfferFilters{top, own} {
		if o.Reliability2 != nil {
			f.Reliability2 = *o.Reliability2
		}
		if o.Verified != nil {
			f.Verified = *o.Verified
		}
		if o.CUDAMaxGood != nil {
			f.CUDAMaxGood = *o.CUDAMaxGood
		}
		if o.InetDown != nil {
			f.InetDown = *o.InetDown
		}
		if o.InetUp != nil {
			f.InetUp = *o.InetUp
		}
		if o.Datacenter != nil {
			f.Datacenter = *o.Datacenter
		}
		if len(o.Geolocation) > 0 {
			f.Geolocation = o.Geolocation
		}
		for k, v := range o.Search {
			if f.Search == nil {
				f.Search = map[string]map[string]any{}
			}
			f.Search[k] = v
		}
	}
	return f
}
