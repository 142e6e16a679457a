package guestapi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/agent/hostcheck"
)

// gpu is one row of the dashboard's GPU block. What the host does not
// expose stays unknown (-1 or ""), shown as a placeholder.
type gpu struct {
	Model       string
	Bus         string // PCI address, e.g. 0000:01:00.0
	MemTotalMiB int64
	MemUsedMiB  int64
	UtilPct     int
	TempC       int
}

func unknownGPU() gpu { return gpu{MemTotalMiB: -1, MemUsedMiB: -1, UtilPct: -1, TempC: -1} }

// gpuSource reads GPUs from ROOT/proc/driver/nvidia/gpus/*/information (the
// driver's own files: model and bus address, no tool needed) and, only when
// nvidia-smi is present, memory, utilisation and temperature from it. The
// tool's answer is cached: a page view must not fork a process each time.
type gpuSource struct {
	root string
	smi  string // path of nvidia-smi; "" = look it up in PATH; "-" = never run it
	now  func() time.Time

	mu      sync.Mutex
	cached  []gpu
	cacheAt time.Time
}

const gpuCacheFor = 5 * time.Second

func (g *gpuSource) read() []gpu {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cached != nil && g.now().Sub(g.cacheAt) < gpuCacheFor {
		return g.cached
	}
	gpus := readProcGPUs(g.root)
	if out := g.runSMI(); out != "" {
		gpus = mergeSMI(gpus, parseNvidiaSMI(out))
	}
	g.cached, g.cacheAt = gpus, g.now()
	if g.cached == nil {
		g.cached = []gpu{}
	}
	return g.cached
}

// runSMI runs nvidia-smi's CSV query. In the agent a supervisor may reap
// the child first (it owns every child), so Wait's error is not trusted:
// the output is kept when it parses.
func (g *gpuSource) runSMI() string {
	path := g.smi
	if path == "-" {
		return ""
	}
	if path == "" {
		p, err := exec.LookPath("nvidia-smi")
		if err != nil {
			return ""
		}
		path = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, "--query-gpu=pci.bus_id,name,memory.total,memory.used,utilization.gpu,temperature.gpu",
		"--format=csv,noheader,nounits").Output()
	return string(out)
}

// readProcGPUs lists ROOT/proc/driver/nvidia/gpus/<bus>/information, sorted by bus.
func readProcGPUs(root string) []gpu {
	dir := filepath.Join(root, "proc/driver/nvidia/gpus")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []gpu
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "information"))
		if err != nil {
			continue
		}
		g := parseNvidiaInformation(string(b))
		if g.Bus == "" {
			g.Bus = e.Name()
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bus < out[j].Bus })
	return out
}

// parseNvidiaInformation reads the driver's Model line (as the enrollment
// report reads it: hostcheck.ParseGPUModel) and Bus Location; the GPU UUID
// is left out: it names the host's hardware.
func parseNvidiaInformation(s string) gpu {
	g := unknownGPU()
	g.Model = hostcheck.ParseGPUModel(s)
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Bus Location" {
			g.Bus = strings.TrimSpace(v)
		}
	}
	return g
}

// parseNvidiaSMI reads `--format=csv,noheader,nounits` lines in the order
// the query names; "[N/A]" and other non-numbers stay unknown.
func parseNvidiaSMI(s string) []gpu {
	var out []gpu
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 6 {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		g := gpu{Bus: f[0], Model: f[1], MemTotalMiB: num(f[2]), MemUsedMiB: num(f[3]), UtilPct: int(num(f[4])), TempC: int(num(f[5]))}
		out = append(out, g)
	}
	return out
}

func num(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// mergeSMI adds nvidia-smi's numbers to the driver's rows by PCI address
// (nvidia-smi writes an 8-digit domain: 00000000:01:00.0). With no driver
// rows, nvidia-smi's own are the list.
func mergeSMI(proc, smi []gpu) []gpu {
	if len(proc) == 0 {
		return smi
	}
	for i := range proc {
		for _, s := range smi {
			if busKey(s.Bus) == busKey(proc[i].Bus) {
				model, bus := proc[i].Model, proc[i].Bus
				proc[i] = s
				proc[i].Bus = bus
				if model != "" {
					proc[i].Model = model
				}
			}
		}
	}
	return proc
}

// busKey is bus:device.function, lowercase, without the domain.
func busKey(b string) string {
	b = strings.ToLower(b)
	if i := strings.Index(b, ":"); i >= 0 && strings.Count(b, ":") == 2 {
		return b[i+1:]
	}
	return b
}
