// Package labels parses and matches node labels: the "k=v,k=v" sets a node
// declares with vigil-node -labels, and the "SITE: k=v,k=v" entries of the
// gateway's site_labels attribute that narrow a site's probes to the nodes
// carrying every listed label.
package labels
