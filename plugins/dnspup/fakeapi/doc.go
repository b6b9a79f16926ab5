// Package fakeapi is a stand-in for the dnspup Customer API v1, for tests
// and for the quickstart demo (cmd/vigil-fake-dnspup). It is a normal
// package so that both can use it.
//
// It follows the documented contract (auth headers, endpoints, the error
// envelope and its codes, Retry-After) and answers probes in the shape that
// ../api/results.go assumes. Its checkpoints are pretend: by default every
// checkpoint "probes" a target by fetching it once from this process, so a
// demo origin that fails shows as down from every checkpoint. Tests and the
// demo can script per-checkpoint results, errors for the next N calls or for
// every call, a quota, and a delay before every probe answer (a slow API);
// they can read how many requests arrived and what
// they carried.
//
// Besides /v1/*, it serves a small unauthenticated control surface for
// scripts (meant for loopback only):
//
//	POST /_fake/fail  {"code":"rate_limited","retryAfter":3,"count":1}   count 0: until cleared; code "": clear
//	POST /_fake/node  {"nodeId":"fra-1","status":503,"error":""}        both empty: clear the override
//	POST /_fake/delay {"seconds":2.5}                                   probe answers take this long; 0: at once
//	GET  /_fake/stats {"requests":{"/v1/probes":3,…},"accepted":3}
package fakeapi
