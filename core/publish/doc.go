// Package publish holds the current publication (every site's current level
// and that level's enabled origins, versioned) and pushes each new version
// to whoever waits for it: the API's long-poll, the DNS server and any other
// in-process publisher. Nothing polls: a waiter wakes the moment a version
// is published.
package publish
