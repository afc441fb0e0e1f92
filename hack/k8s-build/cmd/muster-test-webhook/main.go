// Command muster-test-webhook is a trivial mutating admission webhook used by the
// harness's e2e test to prove that the local kube-apiserver can call a webhook served on
// 127.0.0.1 (url-based clientConfig with a caBundle). It adds the label
// e2e.muster.dev/webhook-seen=true to every object it is asked about, and counts calls.
//
//	muster-test-webhook --addr 127.0.0.1:0 --cert tls.crt --key tls.key --port-file port
//
// It writes the port it listens on to --port-file once it is serving.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback)")
	cert := flag.String("cert", "", "serving certificate (PEM)")
	key := flag.String("key", "", "serving key (PEM)")
	portFile := flag.String("port-file", "", "write the chosen port here once listening")
	flag.Parse()
	if !strings.HasPrefix(*addr, "127.0.0.1:") {
		log.Fatalf("refusing to listen on %q: loopback only", *addr)
	}

	var calls atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/calls", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, calls.Load()) })
	mux.HandleFunc("/mutate", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		// Add the label; create metadata.labels first if the object has none.
		var obj struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(review.Request.Object.Raw, &obj)
		var patch []map[string]any
		if obj.Metadata.Labels == nil {
			patch = append(patch, map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{}})
		}
		patch = append(patch, map[string]any{"op": "add", "path": "/metadata/labels/muster.dev~1webhook-seen", "value": "true"})
		patchBytes, _ := json.Marshal(patch)
		pt := admissionv1.PatchTypeJSONPatch
		review.Response = &admissionv1.AdmissionResponse{
			UID:       review.Request.UID,
			Allowed:   true,
			Patch:     patchBytes,
			PatchType: &pt,
			Result:    &metav1.Status{Message: "muster-test-webhook"},
		}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
		log.Printf("admitted call %d", calls.Load())
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("listen %s: %v", *addr, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: mux}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		_ = srv.Close()
	}()
	if *portFile != "" {
		if err := os.WriteFile(*portFile, []byte(fmt.Sprintf("%d\n", port)), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("serving on https://127.0.0.1:%d", port)
	if err := srv.ServeTLS(ln, *cert, *key); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
