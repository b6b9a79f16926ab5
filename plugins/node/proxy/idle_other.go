//go:build !unix

package proxy

// idleClean cannot peek on this platform: an idle connection the origin
// closed fails its next request, which is retried as http.Transport would.
func idleClean(*upConn) bool { return true }
