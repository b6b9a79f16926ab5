// Package deploy holds what operators install beside vigil, and its tests:
// the systemd units (systemd/), the default configurations (vigil.hcl,
// vigil-node.env), the Debian package definitions (nfpm/), the container
// recipe (container/) and the release builder (dist/, a module of its own,
// run by `make dist`). The package has no code: its test builds a release
// for linux/amd64 with dist and checks what an operator would get.
package deploy
