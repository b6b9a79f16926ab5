package probe

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// target is a validated request, ready to send.
type target struct {
	url        *url.URL // scheme, Address's host[:port] and the health check path
	dialAddr   string   // host:port to connect to
	addrHost   string   // Address's host, bare (no brackets, no port)
	port       string   // Address's port, the scheme's default when not given
	addrIsIP   bool     // no DNS lookup needed
	host       string   // the site's host, bare
	hostHeader string   // the site's host as sent in the Host header
	serverName string   // TLS server name

	userAgent  string
	header     http.Header // extra headers, the caller's, read only
	headerKeys []string    // header's keys, sorted

	timeout          time.Duration
	maxLatency       time.Duration
	maxBody          int64
	expectedStatuses []int
	expectedBody     string
	followRedirects  bool

	rootCAs            *x509.CertPool
	insecureSkipVerify bool
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}

// prepare validates r and computes what Do sends. Its errors never quote the
// Address or Path in full, nor any header value: they may carry credentials
// or tokens.
func (r *Request) prepare() (target, error) {
	var t target
	if r.Address == "" {
		return t, invalid("address is empty; want scheme://host[:port], for example https://203.0.113.10")
	}
	u, err := url.Parse(r.Address)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error quotes the whole address
		}
		return t, invalid("address is not a URL (%v); want scheme://host[:port]", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		if u.Scheme == "" {
			return t, invalid("address has no scheme; want http:// or https:// before the host")
		}
		return t, invalid("address scheme %q is not http or https", u.Scheme)
	case u.User != nil:
		return t, invalid("address must not carry credentials (user:password@)")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return t, invalid("address has no host; want %s://host[:port]", u.Scheme)
	case u.Path != "" && u.Path != "/" || u.RawPath != "":
		return t, invalid("address must not have a path; put the health check path in Path")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(r.Address, "#"):
		return t, invalid("address must not have a query or fragment")
	}
	t.port = u.Port()
	if t.port != "" {
		if n, err := strconv.Atoi(t.port); err != nil || n < 1 || n > 65535 {
			return t, invalid("address port %q is not a number from 1 to 65535", t.port)
		}
	} else {
		t.port = defaultPort(u.Scheme)
	}
	t.addrHost = u.Hostname()
	t.dialAddr = net.JoinHostPort(t.addrHost, t.port)
	t.addrIsIP = net.ParseIP(t.addrHost) != nil

	path := r.Path
	if path == "" {
		path = DefaultPath
	}
	if path[0] != '/' {
		return t, invalid("path must start with \"/\"")
	}
	if strings.ContainsAny(path, "# \t\r\n") || hasCtl(path) {
		return t, invalid("path must not contain spaces, control characters or a fragment (#)")
	}
	pu, err := url.ParseRequestURI(path)
	if err != nil {
		return t, invalid("path is not a valid request path")
	}
	t.url = &url.URL{
		Scheme:   u.Scheme,
		Host:     u.Host,
		Path:     pu.Path,
		RawPath:  pu.RawPath,
		RawQuery: pu.RawQuery,
	}

	host := r.Host
	if host == "" {
		host = t.addrHost
	}
	if t.host, err = bareHost("host", host); err != nil {
		return t, err
	}
	t.hostHeader = t.host
	if strings.Contains(t.host, ":") {
		t.hostHeader = "[" + t.host + "]"
	}
	t.serverName = t.host
	if r.ServerName != "" {
		if t.serverName, err = bareHost("server name", r.ServerName); err != nil {
			return t, err
		}
	}

	switch {
	case r.UserAgent == "":
		t.userAgent = DefaultUserAgent
	case hasCtl(r.UserAgent):
		return t, invalid("user agent contains control characters")
	default:
		t.userAgent = r.UserAgent
	}
	if len(r.Header) > 0 {
		if err := checkHeader(r.Header); err != nil {
			return t, err
		}
		t.header = r.Header
		t.headerKeys = make([]string, 0, len(r.Header))
		for k := range r.Header {
			t.headerKeys = append(t.headerKeys, k)
		}
		slices.Sort(t.headerKeys)
	}

	t.timeout = r.Timeout
	switch {
	case r.Timeout < 0:
		return t, invalid("timeout %v is negative", r.Timeout)
	case r.Timeout == 0:
		t.timeout = DefaultTimeout
	}
	if r.MaxLatency < 0 {
		return t, invalid("max latency %v is negative", r.MaxLatency)
	}
	t.maxLatency = r.MaxLatency
	t.maxBody = r.MaxBody
	switch {
	case r.MaxBody < 0:
		return t, invalid("max body %d is negative; 0 means the default, %d bytes", r.MaxBody, DefaultMaxBody)
	case r.MaxBody == 0:
		t.maxBody = DefaultMaxBody
	}
	for _, s := range r.ExpectedStatuses {
		if s < 100 || s > 599 {
			return t, invalid("expected status %d is not an HTTP status (100-599)", s)
		}
	}
	t.expectedStatuses = r.ExpectedStatuses
	switch n := int64(len(r.ExpectedBody)); {
	case n > MaxExpectedBody:
		return t, invalid("expected body text is %d bytes, longer than the %d bytes allowed", n, MaxExpectedBody)
	case n > t.maxBody:
		return t, invalid("expected body text is %d bytes, longer than the %d bytes a probe reads (MaxBody)", n, t.maxBody)
	}
	t.expectedBody = r.ExpectedBody
	t.followRedirects = r.FollowRedirects
	t.rootCAs = r.RootCAs
	t.insecureSkipVerify = r.InsecureSkipVerify
	return t, nil
}

// bareHost checks that s is a hostname or IP address with no port, and
// returns it without the brackets of an IPv6 literal.
func bareHost(what, s string) (string, error) {
	h := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if h == "" || strings.ContainsAny(h, "/\\?#@[] \t%") || hasCtl(h) {
		return "", invalid("%s %q is not a bare hostname", what, s)
	}
	if strings.Contains(h, ":") && net.ParseIP(h) == nil {
		return "", invalid("%s %q is not a bare hostname: give it without a port", what, s)
	}
	return h, nil
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// refusedHeaders are the headers a probe sets itself or that frame the
// message, keyed by canonical name, with what to say instead.
var refusedHeaders = map[string]string{
	"Host":              "set Host instead",
	"User-Agent":        "set UserAgent instead",
	"Content-Length":    "the probe frames its own request",
	"Transfer-Encoding": "the probe frames its own request",
	"Connection":        "the probe manages its connection",
	"Keep-Alive":        "the probe manages its connection",
	"Proxy-Connection":  "the probe manages its connection",
	"Upgrade":           "the probe manages its connection",
	"Te":                "the probe manages its connection",
}

// checkHeader validates extra request headers. Its errors name the header
// but never quote a value.
func checkHeader(h http.Header) error {
	for k, vs := range h {
		if !validToken(k) {
			return invalid("header name %q is not a valid HTTP token", k)
		}
		if why, ok := refusedHeaders[http.CanonicalHeaderKey(k)]; ok {
			return invalid("header %s cannot be set in Header: %s", http.CanonicalHeaderKey(k), why)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return invalid("header %s has a value with control characters", http.CanonicalHeaderKey(k))
			}
		}
	}
	return nil
}

// validToken reports whether s is an RFC 9110 token, as header names must be.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s is a header value with no control
// characters other than horizontal tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func hasCtl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// redirectTarget resolves a redirect's Location against cur, the URL just
// asked, and returns the URL to ask next when it stays on the origin. When it
// does not, next is nil and where says, for the Detail, where it went:
// scheme, host and port only, since the rest may carry tokens.
func (t *target) redirectTarget(cur *url.URL, location string) (next *url.URL, where string) {
	lu, err := url.Parse(location)
	if err != nil {
		return nil, "a Location that is not a URL"
	}
	to := cur.ResolveReference(lu)
	h, port := to.Hostname(), to.Port()
	if port == "" && (to.Scheme == "http" || to.Scheme == "https") {
		port = defaultPort(to.Scheme)
	}
	sameHost := strings.EqualFold(h, t.host) || strings.EqualFold(h, t.addrHost)
	if to.Scheme != t.url.Scheme || !sameHost || port != t.port {
		switch {
		case h == "":
			return nil, "a Location with no host"
		case port == "":
			return nil, shorten(to.Scheme + "://" + h)
		}
		return nil, shorten(to.Scheme + "://" + net.JoinHostPort(h, port))
	}
	return &url.URL{
		Scheme:   t.url.Scheme,
		Host:     t.url.Host,
		Path:     to.Path,
		RawPath:  to.RawPath,
		RawQuery: to.RawQuery,
	}, ""
}
