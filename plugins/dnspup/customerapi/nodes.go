package customerapi

import (
	"encoding/json"
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
