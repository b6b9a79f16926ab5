package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Topology is, by site name, every enabled origin of every level: what the
// publication does not carry (it has the current level only).
type Topology map[string][]LevelOrigin

// LevelOrigin is one origin of a site's configuration.
type LevelOrigin struct {
	Name, Address, State string
	Level                int
}

// maxTopology bounds the GET /v1/sites answer read.
const maxTopology = 256 << 20

// FetchTopology reads every site's levels from the control plane's
// GET /v1/sites (baseURL as -control-plane gives it: one URL, or a
// cluster's agents separated by commas, asked in turn until one answers;
// every agent of a cluster serves the same sites). Disabled origins are
// left out, as the publication leaves them out.
func FetchTopology(ctx context.Context, client *http.Client, baseURL, token string) (Topology, error) {
	var errs []error
	for _, u := range strings.Split(baseURL, ",") {
		t, err := fetchTopology(ctx, client, strings.TrimSpace(u), token)
		if err == nil {
			return t, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// fetchTopology is FetchTopology from one control plane.
func fetchTopology(ctx context.Context, client *http.Client, baseURL, token string) (Topology, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/v1/sites", nil)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("topology: GET %s/v1/sites: %w", strings.TrimSuffix(baseURL, "/"), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("topology: GET /v1/sites: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var page struct {
		Sites []struct {
			Site    string `json:"site"`
			Origins map[string]struct {
				State   string `json:"state"`
				Level   int    `json:"level"`
				Address string `json:"address"`
			} `json:"origins"`
		} `json:"sites"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxTopology)).Decode(&page); err != nil {
		return nil, fmt.Errorf("topology: decoding GET /v1/sites: %w", err)
	}
	t := make(Topology, len(page.Sites))
	for _, s := range page.Sites {
		list := []LevelOrigin{}
		for name, o := range s.Origins {
			if o.State == "disabled" {
				continue
			}
			list = append(list, LevelOrigin{Name: name, Address: o.Address, State: o.State, Level: o.Level})
		}
		t[s.Site] = list
	}
	return t, nil
}
