package dockerengine

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// ImageInfo is GET /images/{name}/json (the fields we use).
type ImageInfo struct {
	ID      string `json:"Id"`
	Created string `json:"Created"`
	Size    int64  `json:"Size"`
	// Architecture and Os are the platform the image was built for
	// ("amd64", "linux").
	Architecture string `json:"Architecture"`
	Os           string `json:"Os"`
	Config       struct {
		Env    []string          `json:"Env"`
		Cmd    []string          `json:"Cmd"`
		Labels map[string]string `json:"Labels"`
		// ExposedPorts are the image's EXPOSE ports ("8080/tcp": {}).
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	} `json:"Config"`
	RepoTags []string `json:"RepoTags"`
}

// InspectImage returns an image by name or ID, or ErrNotFound.
func (c *Client) InspectImage(ctx context.Context, name string) (ImageInfo, error) {
	var info ImageInfo
	err := c.call(ctx, "inspect image "+name, http.MethodGet, "/images/"+name+"/json", nil, nil, &info)
	return info, err
}

// RemoveImage removes an image by name or ID.
func (c *Client) RemoveImage(ctx context.Context, name string, force bool) error {
	q := url.Values{"force": {strconv.FormatBool(force)}}
	return c.call(ctx, "remove image "+name, http.MethodDelete, "/images/"+name, q, nil, nil)
}

// ImportImage makes image repo:tag from a root filesystem tar stream (like
// `docker import`); changes are Dockerfile instructions for its config.
func (c *Client) ImportImage(ctx context.Context, rootfsTar io.Reader, repo, tag string, changes []string) error {
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	if len(changes) > 0 {
		q["changes"] = changes
	}
	resp, err := c.do(ctx, "import image "+repo+":"+tag, http.MethodPost, "/images/create", q, rootfsTar, "application/x-tar")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return progressError("import image "+repo+":"+tag, resp.Body)
}

// progressError reads Docker's JSON progress stream and returns the first
// error it reports: a failed import still answers 200.
func progressError(op string, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Error != "" {
			return fmt.Errorf("docker %s: %s", op, m.Error)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("docker %s: %w", op, err)
	}
	return nil
}
