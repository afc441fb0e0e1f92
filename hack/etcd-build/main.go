// Command etcd is etcd's own server entry point, built from the pinned Go module
// (hack/versions.env) because the distribution's etcd is too old for Kubernetes.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
