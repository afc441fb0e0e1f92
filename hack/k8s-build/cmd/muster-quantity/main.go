// Command muster-quantity reads one Kubernetes quantity per line on stdin and prints, a line
// each, how apimachinery reads it: "error" if resource.ParseQuantity refuses it, otherwise
// "ok SIGN VALUE MILLI CANONICAL": its sign (-1, 0, 1), Value() and MilliValue() (what
// kube-scheduler counts for memory and for cpu; "big" above 2^60, muster's largest amount; "-"
// when negative) and the canonical form the apiserver stores. muster-graph's differential test
// (crates/muster-graph/tests/apimachinery_quantities.rs) holds muster's parser to it.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

func main() {
	limit := resource.NewQuantity(1<<60, resource.DecimalSI)
	milliLimit := resource.NewMilliQuantity(1<<60, resource.DecimalSI)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		q, err := resource.ParseQuantity(in.Text())
		if err != nil {
			fmt.Fprintln(out, "error")
			continue
		}
		if q.Sign() < 0 {
			fmt.Fprintln(out, "ok -1 - -", q.String())
			continue
		}
		fmt.Fprintln(out, "ok", q.Sign(), upTo(q, limit, q.Value), upTo(q, milliLimit, q.MilliValue), q.String())
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// upTo is value() while q is at most limit, "big" past it.
func upTo(q resource.Quantity, limit *resource.Quantity, value func() int64) string {
	if q.Cmp(*limit) > 0 {
		return "big"
	}
	return strconv.FormatInt(value(), 10)
}
