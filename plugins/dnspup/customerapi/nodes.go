package customerapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// ParseNodes reads the body of GET /v1/nodes. dnspup documents only that it
// lists the probe nodes with their ids, so the shape is read loosely: a list
// of node objects, bare or under "nodes", "data", "items" or "results". An
// object's id is "id", "nodeId" or "node_id"; "name", "country", "city",
// "provider" are kept when present; "online" (or "status": "online"/
// "offline") is read when present and taken as true otherwise. Nodes come
// back sorted by id, without duplicates or entries lacking an id.
func ParseNodes(body []byte) ([]Node, error) {
	v, err := decodeLoose(body)
	if err != nil {
		return nil, err
	}
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	case map[string]any:
		for _, k := range []string{"nodes", "data", "items", "results"} {
			if arr, ok := x[k].([]any); ok {
				list = arr
				break
			}
			if inner, ok := x[k].(map[string]any); ok {
				if arr, ok := inner["nodes"].([]any); ok {
					list = arr
					break
				}
			}
		}
	}
	seen := map[string]bool{}
	var out []Node
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		var id string
		for _, k := range []string{"id", "nodeId", "node_id"} {
			switch x := m[k].(type) {
			case string:
				id = strings.TrimSpace(x)
			case json.Number:
				id = x.String()
			}
			if id != "" {
				break
			}
		}
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		n := Node{ID: id, Online: true}
		n.Name, _ = firstString(m, "name", "hostname")
		n.Country, _ = firstString(m, "country", "countryCode", "country_code")
		n.City, _ = firstString(m, "city", "location")
		n.Provider, _ = firstString(m, "provider", "asn", "network")
		if b, ok := m["online"].(bool); ok {
			n.Online = b
		} else if s, ok := m["status"].(string); ok {
			switch strings.ToLower(s) {
			case "offline", "down", "disabled", "maintenance":
				n.Online = false
			}
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// nextPage finds the next page of a list answer, as a path (and query)
// under the API root, or "" on the last page. dnspup documents no
// pagination; this reads the common REST shapes, first match wins:
//
//   - a Link header with rel="next" (RFC 8288, as GitHub does);
//   - a cursor in the body: "next_cursor", "nextCursor" or "cursor", at
//     the top or under "meta" or "pagination", sent back as ?cursor=;
//   - a next-page link in the body: "next" or "next_page" (a URL or path),
//     at the top, under "links", "meta" or "pagination".
//
// A link to another host is not followed (the credentials would go with it).
func (c *Client) nextPage(body []byte, header http.Header, path string) string {
	for _, l := range header.Values("Link") {
		for _, part := range strings.Split(l, ",") {
			ref, params, ok := strings.Cut(part, ";")
			if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) && !strings.Contains(strings.ReplaceAll(params, " ", ""), "rel=next") {
				continue
			}
			ref = strings.Trim(strings.TrimSpace(ref), "<>")
			if p := c.samePath(ref); p != "" {
				return p
			}
		}
	}
	v, err := decodeLoose(body)
	if err != nil {
		return ""
	}
	top, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	scopes := []map[string]any{top}
	for _, k := range []string{"meta", "pagination", "links"} {
		if m, ok := top[k].(map[string]any); ok {
			scopes = append(scopes, m)
		}
	}
	for _, m := range scopes {
		for _, k := range []string{"next_cursor", "nextCursor", "cursor"} {
			if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
				return path + "?cursor=" + url.QueryEscape(strings.TrimSpace(s))
			}
		}
	}
	for _, m := range scopes {
		for _, k := range []string{"next", "next_page", "nextPage"} {
			if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
				if p := c.samePath(strings.TrimSpace(s)); p != "" {
					return p
				}
			}
		}
	}
	return ""
}
