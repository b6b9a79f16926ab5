// Package echo is a test vote source shared by sdktest's in-process and
// subprocess tests.
package echo
