// Package demoorigin is a tiny origin server for the quickstart: it answers
// the health check and visitor requests, and can be made to fail and
// recover with one command, so an operator can watch vigil fail over and
// back without touching a real origin.
//
//	vigil-demo-origin -listen 127.0.0.1:18001 -name a1
//	vigil-demo-origin fail 127.0.0.1:18001      # health check answers 503
//	vigil-demo-origin hang 127.0.0.1:18001      # health check never answers
//	vigil-demo-origin recover 127.0.0.1:18001
//
// The same switches are plain HTTP: POST /-/fail, /-/hang, /-/recover.
package demoorigin
