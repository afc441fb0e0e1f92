// Command muster-gang-ready is a test helper of the control-plane harness (hack/).
//
// KWOK cannot see across pods, so it cannot express "this pod finishes N seconds after
// every pod of its job is ready". This helper can: it watches Jobs and Pods and, once
// every pod a Job currently wants running is Running and Ready, it stamps each of those
// pods with the annotation kwok.muster.dev/all-ready-at (RFC 3339, UTC). The KWOK stage
// for pods annotated kwok.muster.dev/run-after=all-ready completes them
// kwok.muster.dev/run-seconds after that stamp (hack/kwok/stages.yaml).
//
// A Job "currently wants" min(parallelism, completions - succeeded) pods (parallelism
// alone when completions is unset). Pods that are not part of a Job can form a gang too:
// label kwok.muster.dev/gang=<name> and annotation kwok.muster.dev/gang-size=<n>.
//
// Only pods annotated kwok.muster.dev/run-after=all-ready are considered.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

const (
	annRunAfter   = "kwok.muster.dev/run-after"
	annAllReadyAt = "kwok.muster.dev/all-ready-at"
	labelGang     = "kwok.muster.dev/gang"
	annGangSize   = "kwok.muster.dev/gang-size"
	labelJobName  = "batch.kubernetes.io/job-name"
	labelJobName0 = "job-name"
)

// gangKey names a group of pods: a Job ("job") or a labelled pod gang ("gang").
type gangKey struct {
	kind, namespace, name string
}

func gangOf(p *corev1.Pod) (gangKey, bool) {
	if p.Annotations[annRunAfter] != "all-ready" {
		return gangKey{}, false
	}
	if n := p.Labels[labelJobName]; n != "" {
		return gangKey{"job", p.Namespace, n}, true
	}
	if n := p.Labels[labelJobName0]; n != "" {
		return gangKey{"job", p.Namespace, n}, true
	}
	if n := p.Labels[labelGang]; n != "" {
		return gangKey{"gang", p.Namespace, n}, true
	}
	return gangKey{}, false
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

type marker struct {
	client kubernetes.Interface
	pods   cache.Indexer
	jobs   cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[gangKey]
	// stamped holds the UIDs of the pods this process stamped whose stamp the informer cache
	// may not show yet: the patches' own watch events queue the gang again, and a sync that
	// runs before the last of them arrives would otherwise stamp that pod a second time, with
	// a later time (seen with Kubernetes 1.37: one gang, two stamps a second apart). An entry
	// goes when an event shows the pod with its stamp (its delete event included).
	stamped sync.Map // types.UID -> struct{}
}

// wanted returns how many pods of the gang must be ready at once, or 0 if unknown.
func (m *marker) wanted(k gangKey, members []*corev1.Pod) int {
	if k.kind == "gang" {
		for _, p := range members {
			if n, err := strconv.Atoi(p.Annotations[annGangSize]); err == nil && n > 0 {
				return n
			}
		}
		return 0
	}
	obj, ok, err := m.jobs.GetByKey(k.namespace + "/" + k.name)
	if err != nil || !ok {
		return 0
	}
	job := obj.(*batchv1.Job)
	if job.Spec.Suspend != nil && *job.Spec.Suspend {
		return 0
	}
	want := 1
	if job.Spec.Parallelism != nil {
		want = int(*job.Spec.Parallelism)
	}
	if job.Spec.Completions != nil {
		if left := int(*job.Spec.Completions) - int(job.Status.Succeeded); left < want {
			want = left
		}
	}
	return want
}

func (m *marker) sync(ctx context.Context, k gangKey) error {
	objs, err := m.pods.ByIndex("gang", fmt.Sprintf("%s/%s/%s", k.kind, k.namespace, k.name))
	if err != nil {
		return err
	}
	var members, ready []*corev1.Pod
	for _, o := range objs {
		p := o.(*corev1.Pod)
		members = append(members, p)
		if podReady(p) {
			ready = append(ready, p)
		}
	}
	want := m.wanted(k, members)
	if want <= 0 || len(ready) < want {
		return nil
	}
	now := time.Now().UTC().Format(time.RFC3339)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annAllReadyAt: now}}})
	marked := 0
	for _, p := range ready {
		if _, done := p.Annotations[annAllReadyAt]; done {
			m.stamped.Delete(p.UID)
			continue
		}
		if _, done := m.stamped.Load(p.UID); done {
			continue
		}
		_, err := m.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("annotate %s/%s: %w", p.Namespace, p.Name, err)
		}
		m.stamped.Store(p.UID, struct{}{})
		marked++
	}
	if marked > 0 {
		klog.InfoS("gang ready", "kind", k.kind, "namespace", k.namespace, "name", k.name, "ready", len(ready), "wanted", want, "marked", marked, "at", now)
	}
	return nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "path to the kubeconfig")
	workers := flag.Int("workers", 4, "concurrent gang syncs")
	klog.InitFlags(nil)
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.UserAgent = "muster-gang-ready"
	client := kubernetes.NewForConfigOrDie(cfg)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	factory := informers.NewSharedInformerFactory(client, 0)
	podInf := factory.Core().V1().Pods().Informer()
	jobInf := factory.Batch().V1().Jobs().Informer()
	if err := podInf.AddIndexers(cache.Indexers{"gang": func(obj any) ([]string, error) {
		if k, ok := gangOf(obj.(*corev1.Pod)); ok {
			return []string{fmt.Sprintf("%s/%s/%s", k.kind, k.namespace, k.name)}, nil
		}
		return nil, nil
	}}); err != nil {
		klog.Fatal(err)
	}
	m := &marker{
		client: client,
		pods:   podInf.GetIndexer(),
		jobs:   jobInf.GetIndexer(),
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[gangKey]()),
	}
	onPod := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			if _, stamped := p.Annotations[annAllReadyAt]; stamped {
				m.stamped.Delete(p.UID)
			}
			if k, ok := gangOf(p); ok {
				m.queue.Add(k)
			}
		}
	}
	onJob := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok {
			m.queue.Add(gangKey{"job", j.Namespace, j.Name})
		}
	}
	_, _ = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, n any) { onPod(n) }, DeleteFunc: onPod,
	})
	_, _ = jobInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onJob, UpdateFunc: func(_, n any) { onJob(n) },
	})
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			klog.Fatalf("cache sync failed for %v", typ)
		}
	}
	klog.InfoS("muster-gang-ready started", "workers", *workers)
	for i := 0; i < *workers; i++ {
		go func() {
			for {
				k, shutdown := m.queue.Get()
				if shutdown {
					return
				}
				if err := m.sync(ctx, k); err != nil {
					klog.ErrorS(err, "sync", "gang", k)
					m.queue.AddRateLimited(k)
				} else {
					m.queue.Forget(k)
				}
				m.queue.Done(k)
			}
		}()
	}
	<-ctx.Done()
	m.queue.ShutDown()
}
