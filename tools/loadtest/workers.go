package main

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// workers is a group of worker processes holding the simulated nodes.
type workers struct {
	procs []*workerProc
	nodes int
}

type workerProc struct {
	cmd   *exec.Cmd
	conn  *lineConn
	nodes int
}

func startWorkers(h *head, nodes []node, per int) (*workers, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	g := &workers{nodes: len(nodes)}
	for from := 0; from < len(nodes); from += per {
		part := nodes[from:min(from+per, len(nodes))]
		cmd := exec.Command(self, "worker")
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := start(cmd, h.cpus.nodes); err != nil {
			g.quit()
			return nil, err
		}
		g.procs = append(g.procs, &workerProc{cmd: cmd, conn: newLineConn(out, in), nodes: len(part)})
		if err := g.procs[len(g.procs)-1].conn.send(command{Op: "init", Nodes: part, CAPEM: string(h.caPEM), HeadA: h.portA}); err != nil {
			return nil, err
		}
	}
	for _, p := range g.procs {
		var r result
		if err := p.conn.recv(&r); err != nil || r.Err != "" {
			g.quit()
			return nil, fmt.Errorf("worker init: %v %s", err, r.Err)
		}
	}
	return g, nil
}

// all sends cmd to every worker at once (a heartbeat rate is split by
// node count) and collects the results.
func (g *workers) all(cmd command) []result {
	res := make([]result, len(g.procs))
	var wg sync.WaitGroup
	for i, p := range g.procs {
		c := cmd
		c.Rate = cmd.Rate * float64(p.nodes) / float64(g.nodes)
		wg.Go(func() {
			if err := p.conn.send(c); err != nil {
				res[i].Err = err.Error()
				return
			}
			if err := p.conn.recv(&res[i]); err != nil {
				res[i].Err = err.Error()
			}
		})
	}
	wg.Wait()
	return res
}

func (g *workers) quit() {
	for _, p := range g.procs {
		p.conn.send(command{Op: "quit"})
		p.cmd.Wait()
	}
}
