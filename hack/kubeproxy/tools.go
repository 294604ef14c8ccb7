//go:build tools

// Package kubeproxy pins kube-proxy of the control plane's Kubernetes (hack/cluster requires the same
// k8s.io/kubernetes and the same staging replacements), in a module of its own so that adding it changes nothing of
// what hack/cluster builds. The real node's tests run it in iptables mode for Services (docs/cluster.md).
package kubeproxy

import _ "k8s.io/kubernetes/cmd/kube-proxy"
