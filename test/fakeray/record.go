package fakeray

import (
	"encoding/json"
	"fmt"
	"os"
)

// SockOp is one bind or connect a process of the stand-in recorded: what it
// asked for and, in Result, where the socket really ended up
// (getsockname/getpeername), so a rewrite underneath (a shim) shows.
type SockOp struct {
	Op        string `json:"op"`
	Addr      string `json:"addr"`
	Port      int    `json:"port"`
	OK        bool   `json:"ok"`
	Errno     int    `json:"errno"`
	ErrnoName string `json:"errno_name"` // EADDRNOTAVAIL, ENETUNREACH, …
	Error     string `json:"error"`
	Result    string `json:"result"`
}

// Child is one process's status: raylet, runtime_env_agent,
// dashboard_agent, core_worker_N, gcs_server, dashboard.
type Child struct {
	Name       string            `json:"name"`
	PID        int               `json:"pid"`
	PPID       int               `json:"ppid"`
	State      string            `json:"state"`
	Argv       []string          `json:"argv"`
	Env        map[string]string `json:"env"`
	Binds      []SockOp          `json:"binds"`
	Connect    *SockOp           `json:"connect"`                   // core worker → raylet
	AgentConn  *SockOp           `json:"runtime_env_agent_connect"` // raylet → runtime-env agent
	WorkerConn []SockOp          `json:"worker_connects"`           // raylet → each worker's port
	Registered bool              `json:"registered"`
	HTTP       string            `json:"http_server"` // dashboard agent: on/off
	NoPorts    int               `json:"no_available_ports"`
	ExitReason string            `json:"exit_reason"`
	Children   []struct {
		Name     string `json:"name"`
		PID      int    `json:"pid"`
		Port     int    `json:"port"`
		Exited   bool   `json:"exited"`
		ExitCode int    `json:"exit_code"`
	} `json:"children"`
}

// Record is `ray start`'s JSON record (README.md lists every field).
type Record struct {
	Argv     []string          `json:"argv"`
	Version  string            `json:"version"`
	Env      map[string]string `json:"env"`
	PID      int               `json:"pid"`
	PPID     int               `json:"ppid"`
	PGID     int               `json:"pgid"`
	SysPath  []string          `json:"sys_path"`
	Imports  map[string]any    `json:"imports"`
	Signal   int               `json:"signal"`
	Ignored  []int             `json:"ignored"`
	After    float64           `json:"exited_after"`
	Error    string            `json:"error"`
	ExitCode *int              `json:"exit_code"`
	Started  bool              `json:"started"`
	Problems []string          `json:"problems"` // empty: a working Ray node
	Children map[string]Child  `json:"children"`
	Exits    map[string]int    `json:"unexpected_exits"`
	Node     struct {
		NodeIP   string `json:"node_ip_address"`
		NodeName string `json:"node_name"`
		Session  string `json:"session_dir"`
		TempDir  string `json:"temp_dir"`
		NumCPUs  int    `json:"num_cpus"`
		Auth     string `json:"auth_token_source"`
		TLS      bool   `json:"tls"`
	} `json:"node"`
}

// ReadRecord reads the record at path.
func ReadRecord(path string) (Record, error) {
	var r Record
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("read fakeray record: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("read fakeray record %s: %w", path, err)
	}
	return r, nil
}
