package edge

import (
	"cmp"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// View is what a driver applies and a template renders: one publication,
// with each site's other levels when they are known.
type View struct {
	// Version is the publication version.
	Version uint64
	// Sites are sorted by name.
	Sites []Site
	// Vars are the operator's -template-var values (for templates).
	Vars map[string]string
}

// Site is one site of the publication.
type Site struct {
	// Name is the site's name; Backend is it as an HAProxy or nginx
	// identifier (letters, digits and _.:- kept, anything else turned to _),
	// with the driver's prefix.
	Name, Backend string
	// Hostname is the Host visitors send.
	Hostname string
	// Level is the current level.
	Level int
	// Origins are the current level's enabled origins, as published.
	Origins []Origin
	// Backup are the enabled origins of the next level that has any (after
	// the current one, else the first before it), from the topology, or
	// from the publication's Backup until the topology is read: what an
	// edge falls back to on its own when every origin of the current level
	// fails (nginx's backup servers; HAProxy's NAME:backup servers, see
	// BackupSuffix).
	Backup []Origin
	// Others are the enabled origins of every other known level (Backup
	// included), by level then name: servers kept out of service.
	Others []Origin
	// Scheme is "https" when any current origin is https (or, during a
	// ramp, any origin of the level being left), else "http".
	Scheme string
	// Ramp, when set, is a failback in progress: the current level's
	// Origins get Ramp.Weight per cent of new requests, Ramp.Origins (the
	// level being left) the rest. It is nil when the publication has no
	// ramp for the site, its weight is out of 1..99, or the level being
	// left has no usable origin. During a ramp, Ramp.Origins are left out
	// of Others and Backup.
	Ramp *Ramp
}

// Ramp is a site's failback ramp, as a driver applies it.
type Ramp struct {
	// Weight is the current level's per cent (1 to 99), FromWeight the
	// level being left's (100 - Weight).
	Weight, FromWeight int
	// From is the level being left; Origins are its enabled origins that
	// are not unhealthy (as published, less those of a current origin's
	// name).
	From    int
	Origins []Origin
	// ServerWeight is the weight of each current-level server and
	// FromServerWeight of each server of the level being left, so that
	// the levels get Weight and FromWeight per cent of the requests with
	// weighted round-robin: Weight and FromWeight when both levels have as
	// many origins, else scaled by the counts (at most 256, HAProxy's
	// largest weight). Each Origin's Weight is its level's.
	ServerWeight, FromServerWeight int
}

// Origin is one origin, with its address split for configuration files.
type Origin struct {
	// Name is the origin's name; Server is it as an identifier.
	Name, Server string
	// Level is the origin's level.
	Level int
	// Address is the URL as configured.
	Address string
	// Scheme is "http" or "https"; Host the host name or IP (IPv6 without
	// brackets); Port the port (the scheme's default when the URL has none);
	// HostPort is host:port as a server line writes it ([v6]:port).
	Scheme, Host, Port, HostPort string
	// TLS is true for https.
	TLS bool
	// State is "unknown", "healthy" or "unhealthy" (current level), or the
	// topology's state for other levels.
	State string
	// Unhealthy is State == "unhealthy".
	Unhealthy bool
	// Weight is, during a ramp, the origin's server weight: the ramp's
	// ServerWeight for the current level's origins, its FromServerWeight
	// for the level being left's; 0 without a ramp (and for Backup and
	// Others).
	Weight int
}

// Ident makes s an identifier HAProxy and nginx accept: letters, digits and
// _.:- are kept, anything else becomes _.
func Ident(s string) string {
	if s == "" {
		return "_"
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == ':', c == '-':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// newOrigin splits an origin's address; ok is false when it is not an
// http(s) URL with a host.
func newOrigin(name, address, state string, level int) (Origin, bool) {
	raw := address
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return Origin{}, false
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	host := u.Hostname()
	return Origin{Name: name, Server: Ident(name), Level: level, Address: address, Scheme: u.Scheme,
		Host: host, Port: port, HostPort: net.JoinHostPort(host, port), TLS: u.Scheme == "https",
		State: state, Unhealthy: state == "unhealthy"}, true
}

// Build makes the View of snap. levels, when not nil, is the topology: by
// site name, every enabled origin of every level. A site the topology does
// not list (not read yet) takes its other levels from the publication's
// Backup, so that its backup servers are there from the first View.
// prefix is put before every backend name. Origins whose address is
// unusable are left out and named in skipped.
func Build(snap *publication.Snapshot, levels Topology, prefix string, vars map[string]string) (v *View, skipped []string) {
	v = &View{Version: snap.Version, Vars: vars}
	for _, ps := range snap.Sites {
		s := Site{Name: ps.Name, Backend: Ident(prefix + ps.Name), Hostname: ps.Hostname, Level: ps.Level, Scheme: "http"}
		current := map[string]bool{}
		for _, po := range ps.Origins {
			o, ok := newOrigin(po.Name, po.Address, po.State, ps.Level)
			if !ok {
				skipped = append(skipped, ps.Name+"/"+po.Name+" ("+po.Address+")")
				continue
			}
			current[po.Name] = true
			if o.TLS {
				s.Scheme = "https"
			}
			s.Origins = append(s.Origins, o)
		}
		if r := ps.Ramp; r != nil && r.Weight > 0 && r.Weight < 100 {
			ramp := &Ramp{Weight: r.Weight, FromWeight: 100 - r.Weight, From: r.From}
			for _, po := range r.FromOrigins {
				if current[po.Name] {
					continue // one server per name
				}
				o, ok := newOrigin(po.Name, po.Address, po.State, r.From)
				if !ok {
					skipped = append(skipped, ps.Name+"/"+po.Name+" ("+po.Address+")")
					continue
				}
				ramp.Origins = append(ramp.Origins, o)
			}
			if len(ramp.Origins) > 0 {
				s.Ramp = ramp
				ramp.ServerWeight, ramp.FromServerWeight = serverWeights(r.Weight, len(s.Origins), len(ramp.Origins))
				for i := range s.Origins {
					s.Origins[i].Weight = ramp.ServerWeight
				}
				for i := range ramp.Origins {
					ramp.Origins[i].Weight = ramp.FromServerWeight
				}
				for _, o := range ramp.Origins {
					current[o.Name] = true
					if o.TLS {
						s.Scheme = "https"
					}
				}
			}
		}
		var others []Origin
		known := levels[ps.Name]
		if len(known) == 0 && ps.Backup != nil {
			// The topology is not read yet (or failed): the publication's
			// own Backup still names the next level, so the edge is never
			// configured without the backup servers the control plane
			// published.
			for _, po := range ps.Backup.Origins {
				known = append(known, LevelOrigin{Name: po.Name, Address: po.Address, State: po.State, Level: ps.Backup.Level})
			}
		}
		for _, to := range known {
			if to.Level == ps.Level || current[to.Name] {
				continue
			}
			if o, ok := newOrigin(to.Name, to.Address, to.State, to.Level); ok {
				others = append(others, o)
			}
		}
		slices.SortFunc(others, func(a, b Origin) int { return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(a.Name, b.Name)) })
		s.Others = others
		s.Backup = backup(others, ps.Level)
		v.Sites = append(v.Sites, s)
	}
	slices.SortFunc(v.Sites, func(a, b Site) int { return cmp.Compare(a.Name, b.Name) })
	return v, skipped
}

// maxServerWeight is HAProxy's largest server weight.
const maxServerWeight = 256

// serverWeights returns the weight of each of n servers of the current
// level and of each of nFrom servers of the level being left that give the
// levels weight and 100-weight per cent of the requests: weight and
// 100-weight themselves when n == nFrom, else weight*nFrom and
// (100-weight)*n over their common divisor, scaled down to at most
// maxServerWeight (and at least 1) when larger.
func serverWeights(weight, n, nFrom int) (int, int) {
	if n == 0 {
		return weight, 100 - weight
	}
	g := gcd(n, nFrom)
	w, wf := weight*nFrom/g, (100-weight)*n/g
	if m := max(w, wf); m > maxServerWeight {
		w = max(1, (w*maxServerWeight+m/2)/m)
		wf = max(1, (wf*maxServerWeight+m/2)/m)
	}
	return w, wf
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// backup picks the origins of the first level after current that has any,
// else of the last level before it.
func backup(others []Origin, current int) []Origin {
	next, prev := 0, 0
	for _, o := range others {
		if o.Level > current && (next == 0 || o.Level < next) {
			next = o.Level
		}
		if o.Level < current && o.Level > prev {
			prev = o.Level
		}
	}
	level := cmp.Or(next, prev)
	var out []Origin
	for _, o := range others {
		if level != 0 && o.Level == level {
			out = append(out, o)
		}
	}
	return out
}

func slicesSort(s []string) { slices.Sort(s) }
