package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// clusterTimeout bounds one GET /v1/cluster, dialTimeout one connection
// to a control plane.
const (
	clusterTimeout = 5 * time.Second
	dialTimeout    = 5 * time.Second
)

// ParseControlPlanes splits -control-plane, a comma-separated list of the
// cluster's API base URLs (one URL for a lone control plane), into its
// URLs without a trailing slash. Each must be http:// or https:// with a
// host, and none may repeat.
func ParseControlPlanes(list string) ([]string, error) {
	var out []string
	for i, item := range strings.Split(list, ",") {
		item = strings.TrimSuffix(strings.TrimSpace(item), "/")
		u, err := url.Parse(item)
		switch {
		case item == "":
			return nil, fmt.Errorf("-control-plane %q: item %d is empty: write the API URLs separated by commas, e.g. https://10.0.0.5:8470,https://10.0.0.6:8470", list, i+1)
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return nil, fmt.Errorf("-control-plane %q: item %d %q is not an API URL: write http://host:port or https://host:port", list, i+1, item)
		case u.User != nil:
			return nil, fmt.Errorf("-control-plane: item %d holds credentials in its URL: give the token with -control-plane-token-env instead", i+1)
		}
		for _, seen := range out {
			if seen == item {
				return nil, fmt.Errorf("-control-plane %q: %q is listed twice: list each agent once", list, item)
			}
		}
		out = append(out, item)
	}
	return out, nil
}

// ParseGateways splits -gateway, a comma-separated list of the cluster's
// vigil-source-node addresses (host:port), into its addresses; none may
// repeat.
func ParseGateways(list string) ([]string, error) {
	var out []string
	for i, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("-gateway %q: item %d is empty: write the gateways' host:port separated by commas", list, i+1)
		}
		if _, _, err := net.SplitHostPort(item); err != nil {
			return nil, fmt.Errorf("gateway address %q: %w (write host:port)", item, err)
		}
		for _, seen := range out {
			if seen == item {
				return nil, fmt.Errorf("-gateway %q: %q is listed twice: list each gateway once", list, item)
			}
		}
		out = append(out, item)
	}
	return out, nil
}

// clusterInfo is the part of GET /v1/cluster the node reads.
type clusterInfo struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Mode   string `json:"mode"`
	Role   string `json:"role"`
	Acting bool   `json:"acting"`
	Leader *struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	} `json:"leader"`
	LeaderConfirmed bool `json:"leader_confirmed"`
}

// leads is whether the instance says it is the acting leader of an
// active/standby cluster: the one writer, so it holds the newest
// publication the store has.
func (c clusterInfo) leads() bool {
	return c.Mode == "active-standby" && c.Role == "leader" && c.Acting
}

// controlPlanes is the node's view of the control plane: the URLs it was
// given and the HTTP client (with -control-plane-ca and the client
// certificate) every request to them uses.
type controlPlanes struct {
	urls   []string
	token  string
	client *http.Client
	// transport is client's, swapped by SetControlPlaneTLS.
	transport *swapTransport
	// following is the URL the publication is followed from now (set by
	// follow), asked first by the reads of GET /v1/sites.
	following atomic.Pointer[string]
}

// newControlPlanes builds the client of the listed control planes; tc,
// when not nil, is the TLS configuration of https URLs. wait is the
// long-poll wait: a request may last that long and 10 seconds more.
func newControlPlanes(urls []string, token string, tc *tls.Config, wait time.Duration) *controlPlanes {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A long poll's connection is idle while it waits: TCP keepalives
	// notice a dead machine (one that sends no reset) within about
	// Idle + Count x Interval, 12 seconds, rather than at the end of the
	// poll; a machine that does not answer a connection costs at most
	// dialTimeout.
	d := &net.Dialer{Timeout: dialTimeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 3 * time.Second, Interval: 3 * time.Second, Count: 3}}
	tr.DialContext = d.DialContext
	st := newSwapTransport(tr, tc)
	return &controlPlanes{urls: urls, token: token, transport: st, client: &http.Client{Transport: st, Timeout: wait + 10*time.Second}}
}

// list is the URLs separated by commas, what edge.FetchTopology reads:
// the one the publication is followed from first (it answers: a dead
// agent listed first would cost every read a timeout), then the others
// in their order.
func (c *controlPlanes) list() string {
	first := c.urls[0]
	if f := c.following.Load(); f != nil {
		first = *f
	}
	out := []string{first}
	for _, u := range c.urls {
		if u != first {
			out = append(out, u)
		}
	}
	return strings.Join(out, ",")
}

// info asks base for GET /v1/cluster. clustered is false, with a nil
// error, when base answers 404: a lone control plane, not part of a
// cluster.
func (c *controlPlanes) info(ctx context.Context, base string) (info clusterInfo, clustered bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/cluster", nil)
	if err != nil {
		return info, false, fmt.Errorf("cluster: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return info, false, fmt.Errorf("cluster: GET %s/v1/cluster: %w", base, explainTLS(err))
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return info, false, nil
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return info, false, fmt.Errorf("cluster: GET %s/v1/cluster: %s: %s", base, resp.Status, strings.TrimSpace(string(b)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return info, false, fmt.Errorf("cluster: decoding GET %s/v1/cluster: %w", base, err)
	}
	return info, true, nil
}

// pickGrace is how long pick waits for the other agents once one has
// answered without leading: a dead machine that drops packets must not
// hold the node for clusterTimeout at every pick.
const pickGrace = time.Second

// pick chooses the control plane to follow: of the listed ones, asked at
// once, the one that says it is the acting leader (as soon as it says
// so); else the leader that an answer names as confirmed (listed or not:
// the node learns the cluster from it); else the first listed one that
// answered (a standby mirrors the leader's publication, and in sharded
// mode every instance serves the whole of it). avoid, when another one
// answers, is not picked: the URL that just failed. "" when none
// answered; errs says why. Once one has answered, the others get
// pickGrace more.
func (c *controlPlanes) pick(ctx context.Context, avoid string) (string, []error) {
	type answer struct {
		i         int
		info      clusterInfo
		clustered bool
		err       error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan answer, len(c.urls))
	for i, u := range c.urls {
		go func() {
			info, clustered, err := c.info(ctx, u)
			ch <- answer{i, info, clustered, err}
		}()
	}
	answers := make([]*answer, len(c.urls))
	failed := map[string]bool{}
	var errs []error
	var grace <-chan time.Time
collect:
	for range c.urls {
		var a answer
		select {
		case a = <-ch:
		case <-grace:
			break collect
		}
		if a.err != nil {
			errs = append(errs, a.err)
			failed[c.urls[a.i]] = true
			continue
		}
		if c.urls[a.i] == avoid {
			continue
		}
		if a.info.leads() {
			return c.urls[a.i], errs
		}
		answers[a.i] = &a
		if grace == nil {
			t := time.NewTimer(pickGrace)
			defer t.Stop()
			grace = t.C
		}
	}
	var named, first string
	for i, a := range answers {
		if a == nil {
			continue
		}
		if a.clustered && a.info.LeaderConfirmed && a.info.Leader != nil && named == "" {
			// A leader that did not answer itself is not followed: a
			// standby names a dead leader until its lease ends.
			if l := c.listed(strings.TrimSuffix(a.info.Leader.URL, "/")); l != "" && l != avoid && !failed[l] {
				named = l
			}
		}
		if first == "" {
			first = c.urls[i]
		}
	}
	for _, u := range []string{named, first} {
		if u != "" {
			return u, errs
		}
	}
	return "", errs
}

// listed returns the listed URL that u names (the same host and port,
// whatever the scheme's case), else u itself.
func (c *controlPlanes) listed(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	for _, l := range c.urls {
		if pl, err := url.Parse(l); err == nil && strings.EqualFold(pl.Host, pu.Host) && strings.EqualFold(pl.Scheme, pu.Scheme) {
			return l
		}
	}
	return u
}

// mayGoBack says whether the publication of base, older than the one the
// node serves, is the truth now: base is a lone control plane (no
// cluster) or the acting leader of an active/standby cluster, so its
// store's history restarted (emptied, or restored from an old copy). A
// standby or a shard that answers an older version has not yet caught up
// with a commit the node already serves: refused. why says which.
func (c *controlPlanes) mayGoBack(ctx context.Context, base string) (ok bool, why string) {
	info, clustered, err := c.info(ctx, base)
	switch {
	case err != nil:
		return false, "its role is unknown (" + err.Error() + ")"
	case !clustered:
		return true, "a lone control plane whose store's history restarted"
	case info.leads():
		return true, "the acting leader, whose store's history restarted"
	case info.Mode == "sharded":
		return false, "a shard that has not caught up (a shard's older version is never followed back)"
	}
	return false, fmt.Sprintf("role %s (not the acting leader): it has not caught up yet", info.Role)
}

// explainTLS adds what to do to a TLS handshake failure with a control
// plane (the node's own wording of the vigil CLI's).
func explainTLS(err error) error {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var notTLS tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("the control plane's certificate is signed by a CA this node does not trust: give the CA's certificate with -control-plane-ca FILE: %w", err)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return fmt.Errorf("the control plane's certificate has expired or is not valid yet (now %s): renew it on the agent (and check this machine's clock): %w", time.Now().UTC().Format(time.RFC3339), err)
	case errors.As(err, &host):
		return fmt.Errorf("the control plane's certificate is not for the address in -control-plane: use a name or IP address it lists, or reissue it with this one: %w", err)
	case remoteAlert(err, "certificate required", "bad certificate", "unknown certificate authority", "certificate expired"):
		return fmt.Errorf("the control plane asks for a client certificate signed by its client_ca_file: give one with -control-plane-cert and -control-plane-key: %w", err)
	case errors.As(err, &notTLS):
		return fmt.Errorf("the control plane answered plain http to https: use an http:// address in -control-plane, or turn on control { api { tls } }: %w", err)
	}
	return err
}

// remoteAlert is whether err is a TLS alert the server sent about the
// client's certificate ("remote error: tls: certificate required"): Go
// gives those as text only.
func remoteAlert(err error, alerts ...string) bool {
	msg := err.Error()
	if !strings.Contains(msg, "remote error: tls: ") {
		return false
	}
	for _, a := range alerts {
		if strings.Contains(msg, "tls: "+a) {
			return true
		}
	}
	return false
}

// explainStatus adds what to do to a refusal of the publication.
func explainStatus(err error) error {
	var se *publication.StatusError
	if !errors.As(err, &se) {
		return explainTLS(err)
	}
	switch se.Code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("the control plane refused this node's token: give -control-plane-token-env naming a variable that holds a token of the node scope (node_token_env) or more: %w", err)
	case http.StatusBadRequest:
		if strings.Contains(se.Body, "HTTPS") {
			return fmt.Errorf("the control plane serves https: use an https:// address in -control-plane: %w", err)
		}
	}
	return err
}
