//go:build tools

// Package tools pins the containerd commands real nodes run (hack/real-nodes.sh), so that
// `go mod tidy` keeps what building them needs.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
