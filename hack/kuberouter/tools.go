//go:build tools

// Package kuberouter pins kube-router, built here for its NetworkPolicy firewall alone (`--run-firewall=true
// --run-router=false --run-service-proxy=false`): iptables and ipset, which this machine's kernel has, where
// kube-network-policies (hack/netpol) needs nftables' queue, which it lacks. Only the tests of the real node run it
// (tests/support/cluster/realnode.py, docs/cluster.md "What a real node enforces"); nothing ships it.
package kuberouter

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
