// Package host is the host side of the vote-source protocol: what vigil
// (or another program that runs vote-source plugins) uses to start and call
// them over hashicorp/go-plugin and gRPC. It holds the go-plugin handshake,
// the plugin sets and the gRPC client.
//
// Plugin authors never need this package: a plugin's whole main is
// sdk.Serve, and package sdktest runs a plugin in tests. It is public only
// because vigil's host lives in another Go module than the SDK. Its API
// follows the SDK's version, but it is not part of what a plugin depends
// on.
package host
