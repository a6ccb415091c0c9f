// Command admission-oracle answers what the Kubernetes 1.37.2 API server's admission does with
// an object: strict decoding, defaulting, conversion to the internal type, the registry
// strategy's PrepareForCreate / PrepareForUpdate (gate-off field dropping) and Validate /
// ValidateUpdate with the declarative validation the generic registry runs (rest.BeforeCreate
// / rest.BeforeUpdate), for the DRA kinds and Pod. It is drakit's oracle for the reference's
// admission (conformance/oracle/admission.py).
//
// Protocol: one JSON object per line on stdin, one per line on stdout, in order.
//
//	{"id": any, "object": {...}, "old": {...} | absent, "gates": {"DRAAdminAccess": true, ...},
//	 "namespaceLabels": {...} | absent}
//
// "old" makes it an update: the old object is decoded (not strictly), defaulted and converted
// as the stored object would have been, and the new object keeps its uid, resourceVersion and
// creationTimestamp when it has none (as a patch carries them). "gates" override the 1.37.2
// defaults for this request only. "namespaceLabels" are the labels of the object's namespace
// (the admin-access check reads them); without them the namespace has no labels.
//
// The answer is one of
//
//	{"id", "stored": {...}}                        accepted; the object as it would be stored
//	{"id", "status": "Invalid", "message": "...", "errors": [{"type", "typeText", "field",
//	  "detail", "body", "message", "origin"}]}   refused by validation, errors in upstream order
//	{"id", "status": "BadRequest", "message": "..."}  refused by decoding
//	{"id", "inputError": "..."}                    the request itself is malformed (bad gates ...)
//
// A {"op": "gates"} request answers {"id", "gates": {name: default}} for every known gate.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	_ "k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/kubernetes/pkg/registry/resource/deviceclass"
	"k8s.io/kubernetes/pkg/registry/resource/devicetaintrule"
	"k8s.io/kubernetes/pkg/registry/resource/resourceclaim"
	"k8s.io/kubernetes/pkg/registry/resource/resourceclaimtemplate"
	"k8s.io/kubernetes/pkg/registry/resource/resourcepoolstatusrequest"
	"k8s.io/kubernetes/pkg/registry/resource/resourceslice"
)

type request struct {
	ID              json.RawMessage   `json:"id,omitempty"`
	Op              string            `json:"op,omitempty"`
	Object          json.RawMessage   `json:"object,omitempty"`
	Old             json.RawMessage   `json:"old,omitempty"`
	Gates           map[string]bool   `json:"gates,omitempty"`
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`
}

type fieldError struct {
	Type     string `json:"type"`
	TypeText string `json:"typeText"`
	Field    string `json:"field"`
	Detail   string `json:"detail"`
	Body     string `json:"body"`
	Message  string `json:"message"`
	Origin   string `json:"origin,omitempty"`
}

type response struct {
	ID         json.RawMessage `json:"id,omitempty"`
	InputError string          `json:"inputError,omitempty"`
	Stored     json.RawMessage `json:"stored,omitempty"`
	Status     string          `json:"status,omitempty"`
	Message    string          `json:"message,omitempty"`
	Errors     []fieldError    `json:"errors,omitempty"`
	Mismatch   string          `json:"mismatch,omitempty"`
	Gates      map[string]bool `json:"gates,omitempty"`
}

// strategy is what the generic registry needs of a kind's strategy for create and update.
type strategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
}

// namespaces answers Get for the one namespace of a request (the admin-access check).
type namespaces struct {
	corev1client.NamespaceInterface
	labels map[string]string
}

func (n *namespaces) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: n.labels}}, nil
}

type kindInfo struct {
	versioned schema.GroupVersion
	strategy  func(ns *namespaces) strategy
}

var kinds = map[schema.GroupVersionKind]kindInfo{}

func init() {
	v1 := schema.GroupVersion{Group: "resource.k8s.io", Version: "v1"}
	add := func(gv schema.GroupVersion, kind string, s func(*namespaces) strategy) {
		kinds[gv.WithKind(kind)] = kindInfo{gv, s}
	}
	add(v1, "DeviceClass", func(*namespaces) strategy { return deviceclass.Strategy })
	add(v1, "ResourceSlice", func(*namespaces) strategy { return resourceslice.Strategy })
	add(v1, "DeviceTaintRule", func(*namespaces) strategy { return devicetaintrule.Strategy })
	add(v1, "ResourceClaim", func(ns *namespaces) strategy { return resourceclaim.NewStrategy(ns, nil) })
	add(v1, "ResourceClaimTemplate", func(ns *namespaces) strategy { return resourceclaimtemplate.NewStrategy(ns) })
	add(schema.GroupVersion{Group: "resource.k8s.io", Version: "v1alpha3"}, "ResourcePoolStatusRequest",
		func(*namespaces) strategy { return resourcepoolstatusrequest.Strategy })
	add(schema.GroupVersion{Version: "v1"}, "Pod", func(*namespaces) strategy { return pod.Strategy })
}

// pristine is the feature gate as the binary starts (1.37.2 defaults); each request gets a copy.
var pristine featuregate.MutableVersionedFeatureGate

var gateCache = map[string]featuregate.MutableVersionedFeatureGate{}

func setGates(gates map[string]bool) error {
	names := make([]string, 0, len(gates))
	for k, v := range gates {
		names = append(names, fmt.Sprintf("%s=%t", k, v))
	}
	sort.Strings(names)
	key := strings.Join(names, ",")
	g, ok := gateCache[key]
	if !ok {
		g = pristine.DeepCopy()
		if err := g.SetFromMap(gates); err != nil {
			return err
		}
		gateCache[key] = g
	}
	utilfeature.DefaultMutableFeatureGate = g
	utilfeature.DefaultFeatureGate = g
	return nil
}

func serializers() (runtime.Serializer, runtime.Serializer) {
	info, ok := runtime.SerializerInfoForMediaType(legacyscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		panic("no JSON serializer")
	}
	return info.StrictSerializer, info.Serializer
}

func typeMeta(raw json.RawMessage) (schema.GroupVersionKind, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return schema.GroupVersionKind{}, err
	}
	return schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind), nil
}

// decode does what the create and update handlers do with a body: decode (strictly, as
// fieldValidation=Strict asks), default, convert to the internal version.
func decode(raw json.RawMessage, gvk schema.GroupVersionKind, strict bool) (runtime.Object, error) {
	strictS, plain := serializers()
	s := plain
	if strict {
		s = strictS
	}
	internal := schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal}
	decoder := legacyscheme.Codecs.DecoderToVersion(s, internal)
	into, err := legacyscheme.Scheme.New(internal.WithKind(gvk.Kind))
	if err != nil {
		return nil, err
	}
	obj, gotGVK, err := decoder.Decode(raw, &gvk, into)
	if err != nil {
		if gotGVK != nil && len(gotGVK.Kind) > 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v",
				gotGVK.Kind, gotGVK.Version, gvk.Kind, err))
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return obj, nil
}

func encode(obj runtime.Object, gv schema.GroupVersion) (json.RawMessage, error) {
	_, plain := serializers()
	enc := legacyscheme.Codecs.EncoderForVersion(plain, gv)
	data, err := runtime.Encode(enc, obj)
	return json.RawMessage(strings.TrimSpace(string(data))), err
}

func convertErrors(errs field.ErrorList) []fieldError {
	out := make([]fieldError, 0, len(errs))
	for _, e := range errs {
		out = append(out, fieldError{Type: string(e.Type), TypeText: e.Type.String(), Field: e.Field,
			Detail: e.Detail, Body: e.ErrorBody(), Message: e.Error(), Origin: e.Origin})
	}
	return out
}

func requestContext(ns string, info kindInfo, verb string) context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), ns)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: verb, APIGroup: info.versioned.Group, APIVersion: info.versioned.Version,
		Namespace: ns,
	})
}

func handle(req request) (resp response) {
	resp.ID = req.ID
	defer func() {
		if r := recover(); r != nil {
			resp = response{ID: req.ID, InputError: fmt.Sprintf("panic: %v", r)}
		}
	}()
	if req.Op == "gates" {
		resp.Gates = map[string]bool{}
		for name, spec := range pristine.GetAll() {
			resp.Gates[string(name)] = spec.Default
		}
		return resp
	}
	if err := setGates(req.Gates); err != nil {
		resp.InputError = "gates: " + err.Error()
		return resp
	}
	gvk, err := typeMeta(req.Object)
	if err != nil {
		resp.InputError = "object: " + err.Error()
		return resp
	}
	info, ok := kinds[gvk]
	if !ok {
		resp.InputError = fmt.Sprintf("object: %s is not a kind this oracle serves", gvk)
		return resp
	}
	ns := &namespaces{labels: req.NamespaceLabels}
	s := info.strategy(ns)

	obj, err := decode(req.Object, gvk, true)
	if err != nil {
		return refused(resp, err)
	}
	objMeta, err := meta.Accessor(obj)
	if err != nil {
		resp.InputError = err.Error()
		return resp
	}
	requestNS := ""
	if s.NamespaceScoped() {
		requestNS = objMeta.GetNamespace()
		if requestNS == "" {
			requestNS = "default"
		}
	}
	qualified := schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}

	if len(req.Old) == 0 {
		ctx := requestContext(requestNS, info, "create")
		rest.FillObjectMetaSystemFields(objMeta)
		if objMeta.GetGenerateName() != "" && objMeta.GetName() == "" {
			objMeta.SetName(s.GenerateName(objMeta.GetGenerateName()))
		}
		shadow := obj.DeepCopyObject()
		if err := rest.BeforeCreate(s, ctx, obj); err != nil {
			resp = refused(resp, err)
			// The same steps once more on a copy, to report each error's detail.
			shadowMeta, _ := meta.Accessor(shadow)
			if rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForScope(requestNS, s.NamespaceScoped()), shadowMeta) == nil {
				s.PrepareForCreate(ctx, shadow)
				errs := rest.ValidateCreate(ctx, shadow, s)
				resp.Errors = convertErrors(errs)
				if again := apierrors.NewInvalid(qualified, shadowMeta.GetName(), errs).Error(); resp.Status == "Invalid" && again != resp.Message {
					resp.Mismatch = again
				}
			}
			return resp
		}
	} else {
		oldGVK, err := typeMeta(req.Old)
		if err != nil || oldGVK != gvk {
			resp.InputError = fmt.Sprintf("old: must be the same kind as object (%v)", err)
			return resp
		}
		old, err := decode(req.Old, gvk, false)
		if err != nil {
			resp.InputError = "old: " + err.Error()
			return resp
		}
		oldMeta, _ := meta.Accessor(old)
		if oldMeta.GetUID() == "" {
			rest.FillObjectMetaSystemFields(oldMeta)
		}
		if oldMeta.GetResourceVersion() == "" {
			oldMeta.SetResourceVersion("1")
		}
		if objMeta.GetResourceVersion() == "" {
			objMeta.SetResourceVersion(oldMeta.GetResourceVersion())
		}
		ctx := requestContext(requestNS, info, "update")
		shadow := obj.DeepCopyObject()
		if err := rest.BeforeUpdate(s, ctx, obj, old); err != nil {
			resp = refused(resp, err)
			shadowMeta, _ := meta.Accessor(shadow)
			if rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForScope(requestNS, s.NamespaceScoped()), shadowMeta) == nil {
				shadowMeta.SetGeneration(oldMeta.GetGeneration())
				s.PrepareForUpdate(ctx, shadow, old)
				if shadowMeta.GetUID() == "" {
					shadowMeta.SetUID(oldMeta.GetUID())
				}
				if t := oldMeta.GetCreationTimestamp(); !t.IsZero() {
					shadowMeta.SetCreationTimestamp(t)
				}
				errs := rest.ValidateUpdate(ctx, shadow, old, s)
				resp.Errors = convertErrors(errs)
				if again := apierrors.NewInvalid(qualified, shadowMeta.GetName(), errs).Error(); resp.Status == "Invalid" && again != resp.Message {
					resp.Mismatch = again
				}
			}
			return resp
		}
	}
	stored, err := encode(obj, info.versioned)
	if err != nil {
		resp.InputError = "encode: " + err.Error()
		return resp
	}
	resp.Stored = stored
	return resp
}

func refused(resp response, err error) response {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		resp.Status = string(status.Status().Reason)
		resp.Message = status.Status().Message
		return resp
	}
	resp.Status = "InternalError"
	resp.Message = err.Error()
	return resp
}

func main() {
	// The registry logs (declarative-validation mismatches ...) must never block on a full stderr pipe.
	klog.SetLogger(logr.Discard())
	pristine = utilfeature.DefaultMutableFeatureGate.DeepCopy()
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var req request
			var resp response
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				resp = response{InputError: "request: " + jerr.Error()}
			} else {
				resp = handle(req)
			}
			if eerr := enc.Encode(resp); eerr != nil {
				fmt.Fprintln(os.Stderr, eerr)
				os.Exit(2)
			}
			if in.Buffered() == 0 {
				out.Flush()
			}
		}
		if err != nil {
			out.Flush()
			return
		}
	}
}
