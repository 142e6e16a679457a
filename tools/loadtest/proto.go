package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// The coordinator drives worker processes with one JSON command per line on
// their stdin; each answers one JSON result per line on stdout. Worker
// processes exist because one process's descriptor limit (20,000 here)
// cannot hold 1,000 nodes × 64 port-check listeners.

type node struct {
	Instance string `json:"instance"`
	IP       string `json:"ip"`
	Token    string `json:"token"`
}

type command struct {
	Op     string  `json:"op"` // init, enroll, hb, quit
	Nodes  []node  `json:"nodes,omitempty"`
	CAPEM  string  `json:"ca_pem,omitempty"`
	HeadA  string  `json:"head_a,omitempty"` // host:port
	Target string  `json:"target,omitempty"` // host:port of port B or the bare server; for enroll, port A when empty
	Alt    string  `json:"alt,omitempty"`    // hb: every other node heartbeats here instead
	Rate   float64 `json:"rate,omitempty"`   // heartbeats per second from this worker
	Secs   float64 `json:"secs,omitempty"`
}

type result struct {
	Err       string  `json:"err,omitempty"`
	Latencies []int64 `json:"lat_us,omitempty"` // one per request, microseconds
	// Slow counts the heartbeats over 100 ms by the second of the phase
	// they were sent in: when the tail happens, not only how long it is.
	Slow     []int  `json:"slow,omitempty"`
	Failures int    `json:"failures"`
	Retries  int    `json:"retries"`
	FirstErr string `json:"first_err,omitempty"`
	// Alt is the figures of the nodes that heartbeat to command.Alt.
	Alt *result `json:"alt,omitempty"`
}

type lineConn struct {
	enc *json.Encoder
	sc  *bufio.Scanner
}

func newLineConn(r io.Reader, w io.Writer) *lineConn {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	return &lineConn{enc: json.NewEncoder(w), sc: sc}
}

func (c *lineConn) send(v any) error { return c.enc.Encode(v) }

func (c *lineConn) recv(v any) error {
	if !c.sc.Scan() {
		if err := c.sc.Err(); err != nil {
			return err
		}
		return fmt.Errorf("peer closed")
	}
	return json.Unmarshal(c.sc.Bytes(), v)
}
