package nodeapi

import "net/netip"

// x509IP is a certificate IP SAN in the registry's canonical form.
func x509IP(b []byte) string {
	a, ok := netip.AddrFromSlice(b)
	if !ok {
		return ""
	}
	return a.Unmap().String()
}
