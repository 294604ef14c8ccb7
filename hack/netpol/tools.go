//go:build tools

// Package netpol pins the NetworkPolicy enforcer issue 33 names, sigs.k8s.io/kube-network-policies, so that it can
// be built here (`go build -o .cache/node/ sigs.k8s.io/kube-network-policies/cmd`) and tried on the real node. It
// cannot program this machine's kernel (no nft_queue; docs/cluster.md, "What a real node enforces"): kube-router
// (hack/kuberouter) enforces there instead; nothing runs this one.
package netpol

import _ "sigs.k8s.io/kube-network-policies/cmd"
