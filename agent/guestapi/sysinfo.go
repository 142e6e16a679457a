package guestapi

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// sysinfo is what /metrics and the dashboard's sysinfo block show.
type sysinfo struct {
	UptimeSeconds  float64
	Load1, Load5   float64
	Load15         float64
	MemTotalBytes  int64
	MemAvailBytes  int64
	Processes      int
	Goroutines     int
	AgentHeapBytes uint64
}

// sysinfo reads /proc under the configured root; missing files leave zeros.
func (s *Server) sysinfo() sysinfo {
	si := sysinfo{UptimeSeconds: s.cfg.Now().Sub(s.started).Seconds(), Goroutines: runtime.NumGoroutine()}
	if b, err := os.ReadFile(filepath.Join(s.cfg.Root, "proc/loadavg")); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			si.Load1, _ = strconv.ParseFloat(f[0], 64)
			si.Load5, _ = strconv.ParseFloat(f[1], 64)
			si.Load15, _ = strconv.ParseFloat(f[2], 64)
		}
	}
	if b, err := os.ReadFile(filepath.Join(s.cfg.Root, "proc/meminfo")); err == nil {
		si.MemTotalBytes = meminfoBytes(b, "MemTotal:")
		si.MemAvailBytes = meminfoBytes(b, "MemAvailable:")
	}
	if s.cfg.Processes != nil {
		si.Processes = len(s.cfg.Processes())
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	si.AgentHeapBytes = ms.HeapAlloc
	return si
}

// meminfoBytes reads one "Key: N kB" line of /proc/meminfo.
func meminfoBytes(b []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n * 1024
		}
	}
	return 0
}

// serveMetrics writes sysinfo in the Prometheus text format.
func (s *Server) serveMetrics(w http.ResponseWriter) {
	si := s.sysinfo()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	for _, m := range []struct {
		name, typ, help string
		v               float64
	}{
		{"rayvast_guest_uptime_seconds", "gauge", "Seconds since the guest API started.", si.UptimeSeconds},
		{"rayvast_guest_load1", "gauge", "1-minute load average.", si.Load1},
		{"rayvast_guest_load5", "gauge", "5-minute load average.", si.Load5},
		{"rayvast_guest_load15", "gauge", "15-minute load average.", si.Load15},
		{"rayvast_guest_memory_total_bytes", "gauge", "MemTotal of /proc/meminfo.", float64(si.MemTotalBytes)},
		{"rayvast_guest_memory_available_bytes", "gauge", "MemAvailable of /proc/meminfo.", float64(si.MemAvailBytes)},
		{"rayvast_guest_processes", "gauge", "Processes the agent supervises.", float64(si.Processes)},
		{"rayvast_guest_agent_goroutines", "gauge", "Goroutines of the agent.", float64(si.Goroutines)},
		{"rayvast_guest_agent_heap_bytes", "gauge", "Heap bytes in use by the agent.", float64(si.AgentHeapBytes)},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", m.name, m.help, m.name, m.typ, m.name,
			strconv.FormatFloat(m.v, 'g', -1, 64))
	}
}
