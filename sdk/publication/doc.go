// Package publication is the wire form of what the vigil control plane
// publishes to nodes and publishers: a versioned snapshot of every site's
// current level and that level's enabled origins, and a client that follows
// it through the long-poll endpoint GET /v1/publication?after=VERSION.
//
// A node agent or a third-party publisher imports this package (it is part
// of the SDK and imports nothing from vigil's core).
package publication
