// The controller-runtime contender of bench/run.ts: the benchmark's three handlers written as a
// Go user writes an operator with sigs.k8s.io/controller-runtime — one manager, one controller,
// one Reconciler over unstructured objects read from the manager's namespace-scoped cache.
//
// It makes the same writes per object as kopf-ts (bench/handlers/kopf_ts.ts) in the same
// persistence mode, so that the audit-log counts of both match:
//
//   - the diff base is the object's "essence" (spec, labels, annotations but its own) as compact
//     JSON: by default in an annotation (as Kopf keeps it), with BENCH_PERSISTENCE=status in
//     status.kopf.last-handled-configuration (as kopf-ts's status-first storages keep it);
//   - no diff base yet: the create handler runs, its result goes to status.create_fn together
//     with the diff base — one merge patch on a CRD without a status subresource, and on a CRD
//     with one a patch of the object (the annotation) followed by a patch of /status (or only
//     the /status patch when the diff base lives in status);
//   - a diff base that differs from the essence: the update handler runs, status.update_fn;
//   - with BENCH_DELETE=1 a finalizer is added first (its own patch, as Kopf does), and removed
//     by one patch once the object is marked for deletion and the delete handler ran.
//
// Every handler run is appended to $BENCH_RUNLOG ("handler name started-ms"). No Events, no
// progress records, no leader election, no metrics or health endpoints.
//
//	KUBECONFIG=… controller-runtime-peer -n NAMESPACE
//
// Environment: BENCH_PLURAL (the resource, kopf.dev/v1), BENCH_STATUS_SUBRESOURCE=1 (the CRD
// has /status), BENCH_PERSISTENCE=status, BENCH_DELETE=1, BENCH_RUNLOG, BENCH_CR_WORKERS
// (MaxConcurrentReconciles, 16 unless set).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	userAgent     = "kopf-bench-controller-runtime"
	finalizer     = "bench.kopf.dev/controller-runtime"
	diffBaseKey   = "bench.kopf.dev/last-handled-configuration"
	diffBaseField = "last-handled-configuration" // under status.kopf
)

type reconciler struct {
	client.Client
	gvk              schema.GroupVersionKind
	statusSubresouce bool
	inStatus         bool
	withDelete       bool
	runlog           *os.File
}

// record appends one handler run to the run log (one write per line: O_APPEND keeps lines whole).
func (r *reconciler) record(handler, name string, started int64) {
	if r.runlog != nil {
		fmt.Fprintf(r.runlog, "%s %s %d\n", handler, name, started)
	}
}

// essence is what counts as a change, as Kopf defines it: spec, labels and annotations other
// than the diff base's own, as compact JSON (keys sorted by encoding/json).
func essence(obj *unstructured.Unstructured) (string, error) {
	body := map[string]any{}
	if spec, ok := obj.Object["spec"]; ok {
		body["spec"] = spec
	}
	meta := map[string]any{}
	if labels := obj.GetLabels(); len(labels) > 0 {
		meta["labels"] = labels
	}
	annotations := map[string]string{}
	for k, v := range obj.GetAnnotations() {
		if k != diffBaseKey && k != "kubectl.kubernetes.io/last-applied-configuration" {
			annotations[k] = v
		}
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	if len(meta) > 0 {
		body["metadata"] = meta
	}
	text, err := json.Marshal(body)
	return string(text), err
}

// diffBase returns the stored essence, if any.
func (r *reconciler) diffBase(obj *unstructured.Unstructured) (string, bool) {
	if r.inStatus {
		value, found, _ := unstructured.NestedString(obj.Object, "status", "kopf", diffBaseField)
		return value, found
	}
	value, found := obj.GetAnnotations()[diffBaseKey]
	if !found {
		return "", false
	}
	// Stored with a trailing newline, as Kopf stores its annotation.
	if n := len(value); n > 0 && value[n-1] == '\n' {
		value = value[:n-1]
	}
	return value, true
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.gvk)
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	name := obj.GetName()

	if obj.GetDeletionTimestamp() != nil {
		if !controllerutil.ContainsFinalizer(obj, finalizer) {
			return ctrl.Result{}, nil
		}
		r.record("delete", name, time.Now().UnixMilli())
		base := obj.DeepCopy()
		controllerutil.RemoveFinalizer(obj, finalizer)
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, obj, patch))
	}

	if r.withDelete && !controllerutil.ContainsFinalizer(obj, finalizer) {
		// The finalizer first, in a patch of its own; the event of that patch brings the object
		// back with it (reconciling on in this call would read a stale cache next time).
		base := obj.DeepCopy()
		controllerutil.AddFinalizer(obj, finalizer)
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, obj, patch))
	}

	current, err := essence(obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	stored, found := r.diffBase(obj)
	var field string
	var result map[string]any
	started := time.Now().UnixMilli()
	switch {
	case !found:
		field = "create_fn"
		r.record("create", name, started)
		result = map[string]any{"message": "hello", "started": started}
	case stored != current:
		field = "update_fn"
		r.record("update", name, started)
		value, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "value")
		if !ok {
			value = nil
		}
		result = map[string]any{"value": value, "started": started}
	default:
		return ctrl.Result{}, nil // our own write, or a change of status: nothing to do
	}

	if r.inStatus {
		base := obj.DeepCopy()
		if err := unstructured.SetNestedField(obj.Object, result, "status", field); err != nil {
			return ctrl.Result{}, err
		}
		if err := unstructured.SetNestedField(obj.Object, current, "status", "kopf", diffBaseField); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, client.IgnoreNotFound(r.writeStatus(ctx, obj, base))
	}

	// The diff base in an annotation: written before the status, so that a reconciliation
	// caused by this first write already finds it.
	base := obj.DeepCopy()
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[diffBaseKey] = current + "\n"
	obj.SetAnnotations(annotations)
	if !r.statusSubresouce {
		if err := unstructured.SetNestedField(obj.Object, result, "status", field); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, obj, client.MergeFrom(base)))
	}
	if err := r.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base = obj.DeepCopy() // as the API server returned it
	if err := unstructured.SetNestedField(obj.Object, result, "status", field); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.writeStatus(ctx, obj, base))
}

// writeStatus writes the status change: through /status if the CRD has it, else with the object.
func (r *reconciler) writeStatus(ctx context.Context, obj, base *unstructured.Unstructured) error {
	if r.statusSubresouce {
		return r.Status().Patch(ctx, obj, client.MergeFrom(base))
	}
	return r.Patch(ctx, obj, client.MergeFrom(base))
}

func main() {
	var namespace string
	flag.StringVar(&namespace, "n", "", "the namespace to serve")
	flag.Parse()
	if namespace == "" {
		fmt.Fprintln(os.Stderr, "usage: controller-runtime-peer -n NAMESPACE")
		os.Exit(2)
	}
	log := ctrl.Log.WithName("bench")
	ctrl.SetLogger(zap.New()) // production settings: JSON, info level

	plural := os.Getenv("BENCH_PLURAL")
	if plural == "" {
		plural = "kopfexamples"
	}
	workers := 16
	if text := os.Getenv("BENCH_CR_WORKERS"); text != "" {
		n, err := strconv.Atoi(text)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "error: BENCH_CR_WORKERS=%q: expected a positive integer\n", text)
			os.Exit(2)
		}
		workers = n
	}

	cfg := ctrl.GetConfigOrDie()
	cfg.UserAgent = userAgent
	// No client-side rate limit, as GetConfig already sets (relying on the API server's priority
	// and fairness); stated here so that a change of that default cannot slip in. The other
	// contenders have none either. A negative QPS leaves client-go without a rate limiter.
	cfg.QPS = -1

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Client:  client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		log.Error(err, "cannot create the manager")
		os.Exit(1)
	}
	gvr := schema.GroupVersionResource{Group: "kopf.dev", Version: "v1", Resource: plural}
	gvk, err := mgr.GetRESTMapper().KindFor(gvr)
	if err != nil {
		log.Error(err, "cannot map the resource to a kind", "resource", gvr)
		os.Exit(1)
	}

	r := &reconciler{
		Client:           mgr.GetClient(),
		gvk:              gvk,
		statusSubresouce: os.Getenv("BENCH_STATUS_SUBRESOURCE") == "1",
		inStatus:         os.Getenv("BENCH_PERSISTENCE") == "status",
		withDelete:       os.Getenv("BENCH_DELETE") == "1",
	}
	if path := os.Getenv("BENCH_RUNLOG"); path != "" {
		r.runlog, err = os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			log.Error(err, "cannot open the run log")
			os.Exit(1)
		}
	}

	watched := &unstructured.Unstructured{}
	watched.SetGroupVersionKind(gvk)
	err = ctrl.NewControllerManagedBy(mgr).
		For(watched).
		Named("bench").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
	if err != nil {
		log.Error(err, "cannot create the controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "the manager stopped")
		os.Exit(1)
	}
}
