//go:build tools

// Package coredns pins CoreDNS, the cluster DNS the real node's tests run (its kubernetes plugin answers
// <service>.<namespace>.svc.cluster.local from the API server), built from its module here.
package coredns

import _ "github.com/coredns/coredns"
