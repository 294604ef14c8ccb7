//go:build tools

// Package node pins the node's own runtime pieces this module builds (tests/support/cluster/realnode.py): containerd
// v2 with its runc shim and ctr, and the CNI plugins the node's network uses. The build tag keeps it out of every
// build while `go mod tidy` still sees it.
package node

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)
