package hostcheck

import (
	"strings"
	"testing"
)

func TestCheckShm(t *testing.T) {
	tests := []struct {
		name       string
		tree       map[string]string
		wantOK     bool
		wantDetail string
	}{
		{"empty", map[string]string{"dev/shm/": ""}, true, "/dev/shm is empty"},
		{"missing", map[string]string{"dev/": ""}, false, "/dev/shm is missing"},
		{"a file", map[string]string{"dev/shm/sem.x": "1"}, false, "1 entries: sem.x"},
		{"a dotfile", map[string]string{"dev/shm/.hidden": ""}, false, ".hidden"},
		{"a directory", map[string]string{"dev/shm/d/": ""}, false, "1 entries: d"},
		{"many, listed briefly", map[string]string{"dev/shm/a": "", "dev/shm/b": "", "dev/shm/c": "", "dev/shm/d": "", "dev/shm/e": "", "dev/shm/f": ""}, false, "6 entries: a, b, c, d, e, …"},
		{"not a directory", map[string]string{"dev/shm": "x"}, false, "cannot list /dev/shm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkShm(Config{Root: tree(t, tt.tree)})
			if got.OK != tt.wantOK || !strings.Contains(got.Detail, tt.wantDetail) {
				t.Errorf("got %+v, want ok=%v detail containing %q", got, tt.wantOK, tt.wantDetail)
			}
		})
	}
}

func TestCountGPUs(t *testing.T) {
	tests := []struct {
		name string
		tree map[string]string
		want int
	}{
		{"none", map[string]string{"dev/null": ""}, 0},
		{"nothing at all", map[string]string{}, 0},
		{"proc wins", map[string]string{
			"proc/driver/nvidia/gpus/0000:01:00.0/information": "",
			"proc/driver/nvidia/gpus/0000:02:00.0/information": "",
			"dev/nvidia0": "", "dev/nvidia1": "", "dev/nvidia2": "", "dev/nvidia3": "",
		}, 2},
		{"dev fallback skips control nodes", map[string]string{
			"dev/nvidia0": "", "dev/nvidia1": "", "dev/nvidia10": "",
			"dev/nvidiactl": "", "dev/nvidia-uvm": "", "dev/nvidia-uvm-tools": "", "dev/nvidia-modeset": "", "dev/nvidia-caps/": "",
		}, 3},
		{"empty proc dir falls back", map[string]string{"proc/driver/nvidia/gpus/": "", "dev/nvidia0": ""}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NVIDIA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
			if got := countGPUs(Config{Root: tree(t, tt.tree)}); got != tt.want {
				t.Errorf("got %d GPUs, want %d", got, tt.want)
			}
		})
	}
}
