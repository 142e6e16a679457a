package hostcheck

import (
	"slices"
	"testing"
)

// info is an /proc/driver/nvidia/gpus/*/information file as the driver
// writes it (tabs after the key, the model with its vendor prefix).
func info(model string) string {
	return "Model: \t\t " + model + "\nIRQ:   \t\t 61\nGPU UUID: \t GPU-1b2c\nVideo BIOS: \t 92.00.45.00.03\nBus Type: \t PCIe\n"
}

func TestGPUModels(t *testing.T) {
	const dir = "proc/driver/nvidia/gpus/"
	for _, c := range []struct {
		name string
		tree map[string]string
		want []string
	}{
		{"no driver", map[string]string{"dev/null": ""}, []string{}},
		{"one", map[string]string{dir + "0000:01:00.0/information": info("NVIDIA A100-SXM4-80GB")}, []string{"NVIDIA A100-SXM4-80GB"}},
		{"in PCI order", map[string]string{
			dir + "0000:81:00.0/information": info("NVIDIA GeForce RTX 4090"),
			dir + "0000:01:00.0/information": info("NVIDIA GeForce RTX 3090"),
		}, []string{"NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090"}},
		{"no Model line", map[string]string{dir + "0000:01:00.0/information": "IRQ: 61\n"}, []string{""}},
		{"unreadable file", map[string]string{dir + "0000:01:00.0/": ""}, []string{""}},
		{"control chars made spaces", map[string]string{dir + "0000:01:00.0/information": "Model:\tNVIDIA\x1b[31m H100\n"}, []string{"NVIDIA [31m H100"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := gpuModels(Config{Root: tree(t, c.tree)})
			if !slices.Equal(got, c.want) || got == nil {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestParseGPUModel(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{info("Tesla T4"), "Tesla T4"},
		{"IRQ: 1\nModel:  NVIDIA  H100  80GB HBM3 \n", "NVIDIA H100 80GB HBM3"},
		{"ModelName: x\n", ""},
		{"Model: " + string(make([]byte, 0)) + "\n", ""},
		{"Model: " + repeat("A", 300) + "\n", repeat("A", 128)},
	} {
		if got := ParseGPUModel(c.in); got != c.want {
			t.Errorf("ParseGPUModel(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func repeat(s string, n int) string {
	b := make([]byte, 0, n)
	for range n {
		b = append(b, s...)
	}
	return string(b)
}
