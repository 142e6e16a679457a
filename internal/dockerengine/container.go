package dockerengine

import (
	"archive/tar"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ContainerConfig is the body of POST /containers/create: the subset of
// Docker's container config and host config that rayvast uses.
type ContainerConfig struct {
	Image        string            `json:"Image"`
	Entrypoint   []string          `json:"Entrypoint,omitempty"`
	Cmd          []string          `json:"Cmd,omitempty"`
	Env          []string          `json:"Env,omitempty"` // KEY=value
	Labels       map[string]string `json:"Labels,omitempty"`
	Hostname     string            `json:"Hostname,omitempty"`
	User         string            `json:"User,omitempty"`
	WorkingDir   string            `json:"WorkingDir,omitempty"`
	StopSignal   string            `json:"StopSignal,omitempty"`
	StopTimeout  *int              `json:"StopTimeout,omitempty"`
	AttachStdout bool              `json:"AttachStdout,omitempty"`
	AttachStderr bool              `json:"AttachStderr,omitempty"`

	HostConfig       HostConfig        `json:"HostConfig"`
	NetworkingConfig *NetworkingConfig `json:"NetworkingConfig,omitempty"`
}

// HostConfig is the part of the container config about the host.
type HostConfig struct {
	NetworkMode string            `json:"NetworkMode,omitempty"`
	CapAdd      []string          `json:"CapAdd,omitempty"`
	CapDrop     []string          `json:"CapDrop,omitempty"`
	IpcMode     string            `json:"IpcMode,omitempty"`
	ShmSize     int64             `json:"ShmSize,omitempty"`
	Tmpfs       map[string]string `json:"Tmpfs,omitempty"`
	Privileged  bool              `json:"Privileged,omitempty"`
	AutoRemove  bool              `json:"AutoRemove,omitempty"`
	Init        *bool             `json:"Init,omitempty"`
	Memory      int64             `json:"Memory,omitempty"`
	PidsLimit   *int64            `json:"PidsLimit,omitempty"`
}

// NetworkingConfig attaches a new container to networks at create time.
type NetworkingConfig struct {
	EndpointsConfig map[string]EndpointSettings `json:"EndpointsConfig"`
}

// EndpointSettings is one network attachment.
type EndpointSettings struct {
	IPAMConfig *EndpointIPAM `json:"IPAMConfig,omitempty"`
	Aliases    []string      `json:"Aliases,omitempty"`
	// Filled in by inspect:
	NetworkID  string `json:"NetworkID,omitempty"`
	IPAddress  string `json:"IPAddress,omitempty"`
	Gateway    string `json:"Gateway,omitempty"`
	MacAddress string `json:"MacAddress,omitempty"`
}

// EndpointIPAM asks for a fixed address (only on networks with a
// user-configured subnet).
type EndpointIPAM struct {
	IPv4Address string `json:"IPv4Address,omitempty"`
}

// CreateContainer creates (does not start) a container named name ("" lets
// Docker pick) and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, name string, cfg ContainerConfig) (string, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	var out struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, "create container "+name, http.MethodPost, "/containers/create", q, cfg, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// StartContainer starts a created or stopped container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	return c.call(ctx, "start container "+id, http.MethodPost, "/containers/"+url.PathEscape(id)+"/start", nil, nil, nil)
}

// StopContainer sends the stop signal (SIGTERM by default), waits up to
// timeout, then SIGKILLs; like `docker stop`.
func (c *Client) StopContainer(ctx context.Context, id string, timeout time.Duration) error {
	q := url.Values{"t": {strconv.Itoa(int(timeout / time.Second))}}
	err := c.call(ctx, "stop container "+id, http.MethodPost, "/containers/"+url.PathEscape(id)+"/stop", q, nil, nil)
	return err
}

// KillContainer sends signal ("" = SIGKILL) to the container's PID 1.
func (c *Client) KillContainer(ctx context.Context, id, signal string) error {
	q := url.Values{}
	if signal != "" {
		q.Set("signal", signal)
	}
	return c.call(ctx, "kill container "+id, http.MethodPost, "/containers/"+url.PathEscape(id)+"/kill", q, nil, nil)
}

// RemoveContainer removes a container and its anonymous volumes; force kills
// it first if it runs. A container already gone is ErrNotFound.
func (c *Client) RemoveContainer(ctx context.Context, id string, force bool) error {
	q := url.Values{"v": {"1"}, "force": {strconv.FormatBool(force)}}
	return c.call(ctx, "remove container "+id, http.MethodDelete, "/containers/"+url.PathEscape(id), q, nil, nil)
}

// WaitContainer blocks until the container stops and returns its exit code.
func (c *Client) WaitContainer(ctx context.Context, id string) (int, error) {
	var out struct {
		StatusCode int `json:"StatusCode"`
		Error      *struct {
			Message string `json:"Message"`
		} `json:"Error"`
	}
	q := url.Values{"condition": {"not-running"}}
	if err := c.call(ctx, "wait container "+id, http.MethodPost, "/containers/"+url.PathEscape(id)+"/wait", q, nil, &out); err != nil {
		return 0, err
	}
	if out.Error != nil && out.Error.Message != "" {
		return out.StatusCode, fmt.Errorf("docker wait container %s: %s", id, out.Error.Message)
	}
	return out.StatusCode, nil
}

// ContainerInfo is GET /containers/{id}/json (the fields we use; Raw keeps
// the whole document, e.g. for a test that greps it for secrets).
type ContainerInfo struct {
	ID      string `json:"Id"`
	Name    string `json:"Name"` // with a leading "/"
	Image   string `json:"Image"`
	Created string `json:"Created"`
	State   struct {
		Status     string `json:"Status"` // created, running, exited, …
		Running    bool   `json:"Running"`
		Pid        int    `json:"Pid"`
		ExitCode   int    `json:"ExitCode"`
		OOMKilled  bool   `json:"OOMKilled"`
		StartedAt  string `json:"StartedAt"`
		FinishedAt string `json:"FinishedAt"`
	} `json:"State"`
	Config struct {
		Env        []string          `json:"Env"`
		Cmd        []string          `json:"Cmd"`
		Entrypoint []string          `json:"Entrypoint"`
		Labels     map[string]string `json:"Labels"`
		Image      string            `json:"Image"`
	} `json:"Config"`
	HostConfig      HostConfig `json:"HostConfig"`
	NetworkSettings struct {
		Networks map[string]EndpointSettings `json:"Networks"`
	} `json:"NetworkSettings"`

	Raw []byte `json:"-"`
}

// InspectContainer returns a container's state and config, or ErrNotFound.
func (c *Client) InspectContainer(ctx context.Context, id string) (ContainerInfo, error) {
	var info ContainerInfo
	resp, err := c.do(ctx, "inspect container "+id, http.MethodGet, "/containers/"+url.PathEscape(id)+"/json", nil, nil, "")
	if err != nil {
		return info, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return info, fmt.Errorf("docker inspect container %s: %w", id, err)
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return info, fmt.Errorf("docker inspect container %s: decode: %w", id, err)
	}
	info.Raw = raw
	return info, nil
}

// ContainerSummary is one entry of GET /containers/json.
type ContainerSummary struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"` // with leading "/"
	Image  string            `json:"Image"`
	State  string            `json:"State"`
	Status string            `json:"Status"`
	Labels map[string]string `json:"Labels"`
}

// ListContainers lists containers, stopped ones too, that carry every label
// given ("key" or "key=value").
func (c *Client) ListContainers(ctx context.Context, labels ...string) ([]ContainerSummary, error) {
	q := url.Values{"all": {"1"}}
	if len(labels) > 0 {
		q.Set("filters", labelFilter(labels...))
	}
	var out []ContainerSummary
	if err := c.call(ctx, "list containers", http.MethodGet, "/containers/json", q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ContainerLogs returns everything the container wrote to stdout and stderr
// (as `docker logs` shows it; containers without a TTY).
func (c *Client) ContainerLogs(ctx context.Context, id string) (stdout, stderr []byte, err error) {
	return c.ContainerLogsTail(ctx, id, 0)
}

// ContainerLogsTail is ContainerLogs of the last lines only (0: all): a
// candidate that floods its log costs a poller nothing.
func (c *Client) ContainerLogsTail(ctx context.Context, id string, lines int) (stdout, stderr []byte, err error) {
	q := url.Values{"stdout": {"1"}, "stderr": {"1"}, "follow": {"0"}}
	if lines > 0 {
		q.Set("tail", strconv.Itoa(lines))
	}
	resp, err := c.do(ctx, "logs "+id, http.MethodGet, "/containers/"+url.PathEscape(id)+"/logs", q, nil, "")
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	return demux(resp.Body)
}

// demux splits Docker's multiplexed stream: frames of an 8-byte header
// (stream byte, 3 zero bytes, big-endian uint32 length) and the payload.
func demux(r io.Reader) (stdout, stderr []byte, err error) {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return stdout, stderr, nil
			}
			return stdout, stderr, fmt.Errorf("docker logs: frame header: %w", err)
		}
		n := binary.BigEndian.Uint32(hdr[4:])
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return stdout, stderr, fmt.Errorf("docker logs: frame: %w", err)
		}
		switch hdr[0] {
		case 2:
			stderr = append(stderr, buf...)
		default:
			stdout = append(stdout, buf...)
		}
	}
}

// PutArchive extracts a tar stream into the container's filesystem at dir
// (the container may be created and not started).
func (c *Client) PutArchive(ctx context.Context, id, dir string, tarStream io.Reader) error {
	q := url.Values{"path": {dir}}
	resp, err := c.do(ctx, "put archive "+id, http.MethodPut, "/containers/"+url.PathEscape(id)+"/archive", q, tarStream, "application/x-tar")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Commit makes an image repo:tag of the container's filesystem; changes are
// Dockerfile instructions (ENV, CMD, LABEL, …) applied to its config.
func (c *Client) Commit(ctx context.Context, id, repo, tag string, changes []string) (string, error) {
	q := url.Values{"container": {id}, "repo": {repo}, "tag": {tag}, "changes": changes}
	var out struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, "commit "+id, http.MethodPost, "/commit", q, nil, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// ArchiveFile is one entry of CopyFrom.
type ArchiveFile struct {
	Mode int64
	Data []byte
}

// CopyFrom reads path (a file or a directory, like `docker cp`) out of a
// container, running or stopped: regular files by their path in the tar
// (the base name of path first). Files over 16 MiB in total fail.
func (c *Client) CopyFrom(ctx context.Context, id, path string) (map[string]ArchiveFile, error) {
	q := url.Values{"path": {path}}
	resp, err := c.do(ctx, "copy from "+id+":"+path, http.MethodGet, "/containers/"+url.PathEscape(id)+"/archive", q, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]ArchiveFile{}
	tr := tar.NewReader(io.LimitReader(resp.Body, 16<<20))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("docker copy from %s:%s: %w", id, path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return out, fmt.Errorf("docker copy from %s:%s: %w", id, path, err)
		}
		out[h.Name] = ArchiveFile{Mode: h.Mode, Data: b}
	}
}
