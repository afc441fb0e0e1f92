// Command muster-pod is the one program of the harness's pod image (hack/node-image.sh), which
// real nodes run both as their sandbox ("pause") image and as the workload of test pods. No
// registry can be reached from the harness, so every image a real node runs is built locally.
//
//	muster-pod pause            wait for SIGTERM or SIGINT, then exit 0 (a pod sandbox's process)
//	muster-pod run SECONDS      work for SECONDS, then exit 0; exit 143 on SIGTERM before that
//
// As a sandbox's process it is PID 1 of the pod's PID namespace when the pod shares one, so it
// also reaps children that end there.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "pause":
		pause()
	case "run":
		if len(os.Args) != 3 {
			usage()
		}
		seconds, err := strconv.ParseFloat(os.Args[2], 64)
		if err != nil || seconds < 0 {
			fmt.Fprintf(os.Stderr, "muster-pod run: SECONDS must be a number >= 0, got %q\n", os.Args[2])
			os.Exit(2)
		}
		run(time.Duration(seconds * float64(time.Second)))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: muster-pod pause | muster-pod run SECONDS")
	os.Exit(2)
}

func pause() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reapChildren()
			continue
		}
		os.Exit(0)
	}
}

func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

func run(d time.Duration) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	fmt.Printf("muster-pod: running for %s\n", d)
	select {
	case <-time.After(d):
		fmt.Println("muster-pod: done")
	case sig := <-signals:
		fmt.Printf("muster-pod: %s before the end\n", sig)
		os.Exit(143)
	}
}
