package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestClusterLife is one cluster's life, in numbered steps that build on
// each other (one head and its containers serve every step, so the suite
// stays within minutes):
//
//  1. two safe candidates and one that keeps NET_RAW are rented;
//  2. the two enroll, start the stand-in Ray and heartbeat;
//  3. the unsafe one is refused: blocklisted `security`, container removed;
//  4. no secret in `docker inspect` (but the one-use join token), in
//     `docker logs`, in Ray's environment, or in the head's log;
//  5. the head restarts: both nodes keep heartbeating;
//  6. a container is killed: its node becomes `lost`;
//  7. Ray killed inside the other node is started again within seconds, and
//     the head and `head status` show restarts 1;
//  8. `docker stop` of it: the restarted Ray gets SIGTERM and its exit code
//     is the container's.
func TestClusterLife(t *testing.T) {
	c := newCluster(t, "docker")
	ctx := context.Background()
	start := time.Now()

	// 1.
	safe := []wire.CandidateCreated{c.createCandidate(safeType), c.createCandidate(safeType)}
	bad := c.createCandidate(unsafeType)
	joinTokens := map[string]string{}
	for _, x := range append(safe, bad) {
		joinTokens[x.CandidateID] = x.JoinToken
		if x.Env[wire.EnvJoinToken] != x.JoinToken || len(x.JoinToken) != 43 {
			t.Fatalf("candidate %s: env join token %q vs answer %q", x.CandidateID, x.Env[wire.EnvJoinToken], x.JoinToken)
		}
	}

	// 2.
	instances := make([]string, len(safe))
	for i, x := range safe {
		waitFor(t, 2*time.Minute, "candidate "+x.CandidateID+" to enroll and run Ray", func() (bool, string) {
			cd := c.candidate(x.CandidateID)
			n, ok := c.node(cd.InstanceID)
			return ok && n.Ray.State == wire.RayRunning && n.Seq >= 2, fmt.Sprintf("candidate %+v node %+v", cd, n)
		})
		instances[i] = c.candidate(x.CandidateID).InstanceID
	}
	t.Logf("step 2: two nodes enrolled, Ray running, heartbeating after %s", time.Since(start).Round(100*time.Millisecond))

	// 3.
	var refused wire.Candidate
	waitFor(t, time.Minute, "the unsafe candidate to be refused", func() (bool, string) {
		refused = c.candidate(bad.CandidateID)
		return refused.State == wire.StateEnded, fmt.Sprintf("%+v", refused)
	})
	if want := docker.InstanceName(c.name, bad.CandidateID); refused.InstanceID != want || !strings.Contains(refused.Reason, "security") {
		t.Errorf("refused = %+v, want instance %s and a security reason", refused, want)
	}
	bl, err := c.admin.Blocklist(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(bl) != 1 || bl[0].HostID != refused.InstanceID || bl[0].Class != wire.BlockSecurity {
		t.Errorf("blocklist = %+v, want one security entry for %s", bl, refused.InstanceID)
	}
	if _, ok := c.node(refused.InstanceID); ok {
		t.Errorf("the unsafe candidate became a node")
	}
	waitFor(t, 30*time.Second, "the unsafe container to be removed", func() (bool, string) {
		_, err := suite.eng.InspectContainer(ctx, refused.InstanceID)
		return errors.Is(err, dockerengine.ErrNotFound), fmt.Sprint(err)
	})

	// 4.
	checkNoSecrets(t, c, instances, joinTokens)

	// 5.
	before := map[string]int64{}
	for _, id := range instances {
		n, _ := c.node(id)
		before[id] = n.Seq
	}
	c.stopHead()
	restarted := time.Now()
	c.startHead()
	for _, id := range instances {
		waitFor(t, 30*time.Second, id+" heartbeating to the restarted head", func() (bool, string) {
			n, ok := c.node(id)
			return ok && n.State == wire.StateEnrolled && n.Seq > before[id]+1 && n.LastHeartbeat != nil && n.LastHeartbeat.After(restarted),
				fmt.Sprintf("%+v (seq before restart %d)", n, before[id])
		})
	}

	// 6.
	killed, stopped := instances[0], instances[1]
	if err := suite.eng.KillContainer(ctx, killed, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	// Lost after 3 intervals; the head then ends it through the provider,
	// so "ended" with a lost reason counts too.
	waitFor(t, time.Duration(10*heartbeatInterval)*time.Second, killed+" to become lost", func() (bool, string) {
		n, ok := c.node(killed)
		cd := c.candidate(safe[0].CandidateID)
		return ok && (n.State == wire.StateLost || n.State == wire.StateEnded && strings.Contains(cd.Reason, "lost")),
			fmt.Sprintf("node %+v candidate %+v", n, cd)
	})
	waitFor(t, 30*time.Second, "the lost node's container to be removed", func() (bool, string) {
		_, err := suite.eng.InspectContainer(ctx, killed)
		return errors.Is(err, dockerengine.ErrNotFound), fmt.Sprint(err)
	})

	// 7.
	killRay(t, stopped)
	killedAt := time.Now()
	waitFor(t, 30*time.Second, "Ray restarted in "+stopped, func() (bool, string) {
		n, ok := c.node(stopped)
		return ok && n.Ray.Restarts == 1 && n.Ray.State == wire.RayRunning, fmt.Sprintf("%+v", n)
	})
	t.Logf("step 7: Ray killed in %s was running again, restarts 1 at the head, after %s", stopped, time.Since(killedAt).Round(100*time.Millisecond))
	status, err := exec.Command(suite.head, "status", "--state", c.state).CombinedOutput()
	if err != nil {
		t.Fatalf("head status: %v\n%s", err, status)
	}
	if !statusShowsRestarts(string(status), stopped, 1) {
		t.Errorf("head status does not show restarts 1 for %s:\n%s", stopped, status)
	}

	// 8.
	exit := make(chan error, 1)
	var code int
	go func() {
		var err error
		code, err = suite.eng.WaitContainer(ctx, stopped)
		exit <- err
	}()
	time.Sleep(200 * time.Millisecond) // let the wait register first
	if err := suite.eng.StopContainer(ctx, stopped, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-exit; err != nil {
		t.Fatal(err)
	}
	if code != rayExitCode {
		t.Errorf("container exit code after docker stop = %d, want Ray's %d", code, rayExitCode)
	}
	rec := fakerayRecord(t, stopped)
	if sig, _ := rec["signal"].(float64); int(sig) != 15 {
		t.Errorf("the stand-in Ray recorded signal %v, want SIGTERM (15)", rec["signal"])
	}
	t.Logf("done after %s", time.Since(start).Round(100*time.Millisecond))
}

// killRay SIGKILLs the Ray of a node container from the host: the agent is
// the container's PID 1 (State.Pid on the host), Ray its one child.
func killRay(t *testing.T, container string) {
	t.Helper()
	info, err := suite.eng.InspectContainer(context.Background(), container)
	if err != nil || info.State.Pid == 0 {
		t.Fatalf("inspect %s: pid %d, %v", container, info.State.Pid, err)
	}
	// Children are listed per thread, and the supervisor forks from a
	// thread of its own.
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", info.State.Pid))
	var f []string
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		f = append(f, strings.Fields(string(b))...)
	}
	if err != nil || len(f) != 1 {
		t.Fatalf("the agent (host pid %d) has children %q (%v), want Ray alone", info.State.Pid, f, err)
	}
	ray, _ := strconv.Atoi(f[0])
	if err := syscall.Kill(ray, syscall.SIGKILL); err != nil {
		t.Fatalf("kill ray %d: %v", ray, err)
	}
}

// statusShowsRestarts finds the node's row in `head status` and reads it
// at the RESTARTS header's offset (tabwriter aligns columns; headers such
// as "PUBLIC IP" hold spaces, so fields cannot be counted).
func statusShowsRestarts(out, instance string, want int) bool {
	col := -1
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "NODE ") {
			col = strings.Index(l, "RESTARTS")
		}
		if col >= 0 && strings.HasPrefix(l, instance+" ") && len(l) > col {
			f := strings.Fields(l[col:])
			return len(f) > 0 && f[0] == strconv.Itoa(want)
		}
	}
	return false
}

// checkNoSecrets: vast shows env and command publicly, serves logs at a
// public URL, and Ray must not inherit secrets (docs/protocol.md §1, §9).
func checkNoSecrets(t *testing.T, c *cluster, instances []string, joinTokens map[string]string) {
	t.Helper()
	ctx := context.Background()
	secrets := secretSet{}
	headSecrets(t, c.state, secrets)
	for _, id := range instances {
		nodeSecrets(t, id, secrets)
	}
	withTokens := secretSet{}
	for k, v := range secrets {
		withTokens[k] = v
	}
	for id, tok := range joinTokens {
		withTokens["join token of "+id] = tok
	}
	if len(secrets) < 4 {
		t.Fatalf("found only %d secrets to look for: %v", len(secrets), names(secrets))
	}
	for _, id := range instances {
		info, err := suite.eng.InspectContainer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if l := secrets.leaks(info.Raw); len(l) > 0 {
			t.Errorf("docker inspect %s shows secrets: %v", id, l)
		}
		// The one-use join token is the only secret allowed there, and
		// only this candidate's.
		n := 0
		for _, e := range info.Config.Env {
			if strings.HasPrefix(e, wire.EnvJoinToken+"=") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("docker inspect %s: %d join tokens in env, want 1", id, n)
		}
		cand := info.Config.Labels[docker.LabelCandidate]
		others := secretSet{}
		for cid, tok := range joinTokens {
			if cid != cand {
				others[cid] = tok
			}
		}
		// Positive control: the scan does find this candidate's own token.
		if !strings.Contains(string(info.Raw), joinTokens[cand]) {
			t.Errorf("docker inspect %s: own join token not found: the scan is blind", id)
		}
		if l := others.leaks(info.Raw); len(l) > 0 {
			t.Errorf("docker inspect %s shows other candidates' join tokens: %v", id, l)
		}
		out, errOut, err := suite.eng.ContainerLogs(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if l := withTokens.leaks(append(out, errOut...)); len(l) > 0 {
			t.Errorf("docker logs %s shows secrets: %v", id, l)
		}
		rec := fakerayRecord(t, id)
		env, _ := rec["env"].(map[string]any)
		if len(env) == 0 {
			t.Fatalf("%s: the stand-in Ray recorded no environment", id)
		}
		var flat strings.Builder
		for k, v := range env {
			fmt.Fprintf(&flat, "%s=%v\n", k, v)
			if strings.HasPrefix(k, "RAYVAST_") || k == wire.EnvVastAPIKey {
				t.Errorf("%s: Ray's environment has %s", id, k)
			}
		}
		if l := withTokens.leaks([]byte(flat.String())); len(l) > 0 {
			t.Errorf("%s: Ray's environment holds secrets: %v", id, l)
		}
	}
	if l := withTokens.leaks([]byte(c.headLog.String())); len(l) > 0 {
		t.Errorf("the head's log shows secrets: %v", l)
	}
	t.Logf("step 4: %d secret values absent from inspect, logs, Ray's env and the head log: %v", len(withTokens), names(withTokens))
}

func names(s secretSet) []string {
	var out []string
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestAgentHashMismatch: a candidate whose env pins another agent than the
// head serves downloads it, refuses it and executes nothing: no enrollment,
// no Ray, the container exits non-zero saying why. The rental is made by an
// external provider (this test, through the docker provider package) for a
// head with `--provider none`, which is how the pinned hash can differ.
func TestAgentHashMismatch(t *testing.T) {
	c := newCluster(t, "none")
	ctx := context.Background()
	created := c.createCandidate(safeType)
	env := created.Env
	served := env[wire.EnvBootstrapSHA256]
	env[wire.EnvBootstrapSHA256] = strings.Repeat("ab", 32) // not the served agent's
	env["RAYVAST_BOOT_TRIES"] = "3"
	p, err := docker.New(ctx, docker.Config{Engine: suite.eng, Cluster: c.name, Settings: docker.Settings{Image: suite.image}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, err := p.Rent(ctx, providerRequest(created.CandidateID, env))
	if err != nil {
		t.Fatal(err)
	}
	code, err := suite.eng.WaitContainer(ctx, r.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, _ := suite.eng.ContainerLogs(ctx, r.InstanceID)
	if code == 0 || !strings.Contains(string(errOut), "RAYVAST_BOOTSTRAP_SHA256") {
		t.Errorf("exit %d, stderr %q: want non-zero and the hash refusal", code, errOut)
	}
	if _, err := suite.eng.CopyFrom(ctx, r.InstanceID, "/tmp/fakeray-record.json"); !errors.Is(err, dockerengine.ErrNotFound) {
		t.Errorf("the stand-in Ray ran (record: %v)", err)
	}
	if _, err := suite.eng.CopyFrom(ctx, r.InstanceID, "/run/rayvast"); !errors.Is(err, dockerengine.ErrNotFound) {
		t.Errorf("an agent ran (state dir: %v)", err)
	}
	if nodes, err := c.admin.Nodes(context.Background()); err != nil || len(nodes) != 0 {
		t.Errorf("nodes = %+v, %v; want none", nodes, err)
	}
	if cd := c.candidate(created.CandidateID); cd.State == wire.StateEnrolled {
		t.Errorf("candidate enrolled: %+v", cd)
	}
	if served == env[wire.EnvBootstrapSHA256] {
		t.Fatal("test bug: the pinned hash equals the served one")
	}
}
