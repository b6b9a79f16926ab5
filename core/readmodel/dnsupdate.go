package readmodel

import "github.com/vigilcdn/vigil/api"

// DNSUpdates gives the state of the dynamic update (publish
// "dns_update") of a site's name, which lives beside the engine, not in
// its snapshot: the agent provides it and the API asks it per site view.
// DNSUpdate returns nil when the site's name is not updated.
type DNSUpdates interface {
	DNSUpdate(site, hostname string) *api.DNSUpdateView
}

// WithDNSUpdate sets v's DNSUpdate from d (nothing when d is nil).
func WithDNSUpdate(v *api.SiteView, d DNSUpdates) *api.SiteView {
	if v != nil && d != nil {
		v.DNSUpdate = d.DNSUpdate(v.Site, v.Hostname)
	}
	return v
}
