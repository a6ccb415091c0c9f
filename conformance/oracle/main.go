// Command oracle runs the upstream structured allocator (k8s.io/dynamic-resource-allocation)
// on drakit's allocator inputs, for differential testing and benchmarking.
//
// Protocol: one JSON object per line on stdin, one JSON object per line on stdout, in order.
//
// An "allocate" request (the default op) carries the same inputs as drakit's reference
// allocator, in Kubernetes wire form:
//
//	{"id": any, "features": {"DRAAdminAccess": true, ...}, "node": {"name", "labels", "declaredFeatures"},
//	 "classes": [DeviceClass], "slices": [ResourceSlice], "claims": [ResourceClaim],
//	 "allocated": {"devices": ["driver/pool/device"], "shares": [{"device": "driver/pool/device", "shareID": "..."}],
//	               "capacity": {"driver/pool/device": {"name": "quantity"}}},
//	 "allocators": ["incubating", "experimental"], "timeoutSeconds": 10}
//
// and is answered with
//
//	{"id": any, "results": [AllocationResult] | null, "error": "..." | absent, "perNode": bool,
//	 "channel": "incubating", "steps": N, "nanos": N}
//
// "allocators" restricts which implementations upstream may pick (as its own tests do);
// without it NewAllocator chooses exactly as the kube-scheduler does. Share IDs are fresh
// random UUIDs upstream (not injectable): callers must normalise them. "nanos" times
// NewAllocator plus Allocate only (no process start, no JSON).
//
// A "workload" request runs a scheduler-shaped loop inside Go so that a benchmark measures
// the allocator and not the pipe: for every claim in order, a fresh allocator is built from
// the committed state, nodes are tried from a rotating start index until one fits, and the
// result is committed before the next claim:
//
//	{"op": "workload", "features", "nodes": [{"name", "labels"}], "classes", "slices", "claims"}
//	-> {"id", "allocated": N, "nanos": N, "placements": ["node" | ""], "channel"}
//
// A malformed request is answered with {"id", "inputError": "..."}; the process keeps going.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	kjson "sigs.k8s.io/json"
)

// features maps feature gates onto the allocator's switches as the kube-scheduler does
// (pkg/scheduler/framework/plugins/dynamicresources: DeviceBindingAndStatus needs two gates).
// Gates that do not reach the allocator are ignored, so callers can pass a whole gate map.
func features(gates map[string]bool) structured.Features {
	return structured.Features{
		AdminAccess:             gates["DRAAdminAccess"],
		PrioritizedList:         gates["DRAPrioritizedList"],
		PartitionableDevices:    gates["DRAPartitionableDevices"],
		DeviceTaints:            gates["DRADeviceTaints"],
		DeviceBindingAndStatus:  gates["DRADeviceBindingConditions"] && gates["DRAResourceClaimDeviceStatus"],
		ConsumableCapacity:      gates["DRAConsumableCapacity"],
		FractionalCapacityRange: gates["DRAFractionalCapacityRange"],
		ListTypeAttributes:      gates["DRAListTypeAttributes"],
		OptionalNodeOperations:  gates["DRAOptionalNodeOperations"],
		DerivedAttributes:       gates["DRADerivedAttributes"],
		CompatibilityGroups:     gates["DRADeviceCompatibilityGroups"],
	}
}

type nodeSpec struct {
	Name             string            `json:"name"`
	Labels           map[string]string `json:"labels,omitempty"`
	DeclaredFeatures []string          `json:"declaredFeatures,omitempty"`
}

func (n nodeSpec) object() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
		Status:     v1.NodeStatus{DeclaredFeatures: n.DeclaredFeatures},
	}
}

type shareSpec struct {
	Device  string `json:"device"`
	ShareID string `json:"shareID"`
}

type allocatedSpec struct {
	Devices  []string                                `json:"devices,omitempty"`
	Shares   []shareSpec                             `json:"shares,omitempty"`
	Capacity map[string]map[string]resource.Quantity `json:"capacity,omitempty"`
}

type request struct {
	ID             json.RawMessage              `json:"id,omitempty"`
	Op             string                       `json:"op,omitempty"`
	Features       map[string]bool              `json:"features,omitempty"`
	Allocators     []string                     `json:"allocators,omitempty"`
	Node           nodeSpec                     `json:"node"`
	Nodes          []nodeSpec                   `json:"nodes,omitempty"`
	Classes        []*resourceapi.DeviceClass   `json:"classes,omitempty"`
	Slices         []*resourceapi.ResourceSlice `json:"slices,omitempty"`
	Claims         []*resourceapi.ResourceClaim `json:"claims,omitempty"`
	Allocated      allocatedSpec                `json:"allocated"`
	TimeoutSeconds float64                      `json:"timeoutSeconds,omitempty"`
}

type response struct {
	ID         json.RawMessage                `json:"id,omitempty"`
	InputError string                         `json:"inputError,omitempty"`
	Results    []resourceapi.AllocationResult `json:"results"`
	Error      *string                        `json:"error,omitempty"`
	PerNode    bool                           `json:"perNode,omitempty"`
	Panic      string                         `json:"panic,omitempty"`
	Channel    string                         `json:"channel,omitempty"`
	Steps      int64                          `json:"steps,omitempty"`
	Nanos      int64                          `json:"nanos"`
	// workload only
	Allocated  *int     `json:"allocated,omitempty"`
	Placements []string `json:"placements,omitempty"`
}

// splitDeviceID parses "driver/pool/device": driver and device names cannot contain '/',
// pool names can.
func splitDeviceID(s string) (structured.DeviceID, error) {
	first, last := strings.Index(s, "/"), strings.LastIndex(s, "/")
	if first < 0 || first == last {
		return structured.DeviceID{}, fmt.Errorf("device ID %q: want driver/pool/device", s)
	}
	return structured.MakeDeviceID(s[:first], s[first+1:last], s[last+1:]), nil
}

func (a allocatedSpec) state() (structured.AllocatedState, error) {
	st := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, d := range a.Devices {
		id, err := splitDeviceID(d)
		if err != nil {
			return st, fmt.Errorf("allocated.devices: %w", err)
		}
		st.AllocatedDevices.Insert(id)
	}
	for _, s := range a.Shares {
		id, err := splitDeviceID(s.Device)
		if err != nil {
			return st, fmt.Errorf("allocated.shares: %w", err)
		}
		uid := types.UID(s.ShareID)
		st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, &uid))
	}
	for d, caps := range a.Capacity {
		id, err := splitDeviceID(d)
		if err != nil {
			return st, fmt.Errorf("allocated.capacity: %w", err)
		}
		consumed := make(map[resourceapi.QualifiedName]resource.Quantity, len(caps))
		for name, q := range caps {
			consumed[resourceapi.QualifiedName(name)] = q
		}
		st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, consumed))
	}
	return st, nil
}

// classLister answers like the scheduler's informer-backed lister (same not-found error).
type classLister []*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclass"), name)
}

// channelOf and stepsOf read the optional Channel()/GetStats() methods, whose types are
// internal to the upstream module.
func channelOf(a any) string {
	m := reflect.ValueOf(a).MethodByName("Channel")
	if !m.IsValid() {
		return ""
	}
	return fmt.Sprint(m.Call(nil)[0].Interface())
}

func stepsOf(a any) int64 {
	m := reflect.ValueOf(a).MethodByName("GetStats")
	if !m.IsValid() {
		return 0
	}
	f := m.Call(nil)[0].FieldByName("NumAllocateOneInvocations")
	if !f.IsValid() {
		return 0
	}
	return f.Int()
}

func celCache(f structured.Features) *cel.Cache {
	// As the kube-scheduler builds it (dynamicresources.go): size 10, two CEL feature switches.
	return cel.NewCache(10, cel.Features{
		EnableConsumableCapacity: f.ConsumableCapacity,
		EnableListTypeAttributes: f.ListTypeAttributes,
	})
}

func allocate(req *request, resp *response) {
	f := features(req.Features)
	state, err := req.Allocated.state()
	if err != nil {
		resp.InputError = err.Error()
		return
	}
	structured.EnableAllocators(req.Allocators...)
	ctx := context.Background()
	if req.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutSeconds*float64(time.Second)))
		defer cancel()
	}
	start := time.Now()
	alloc, err := structured.NewAllocator(ctx, f, state, classLister(req.Classes), req.Slices, celCache(f))
	if err != nil {
		resp.InputError = err.Error()
		return
	}
	results, err := alloc.Allocate(ctx, req.Node.object(), req.Claims)
	resp.Nanos = time.Since(start).Nanoseconds()
	resp.Channel = channelOf(alloc)
	resp.Steps = stepsOf(alloc)
	if err != nil {
		msg := err.Error()
		resp.Error = &msg
		resp.PerNode = errors.Is(err, structured.ErrFailedAllocationOnNode)
		return
	}
	resp.Results = results
}

func workload(req *request, resp *response) {
	f := features(req.Features)
	state, err := req.Allocated.state()
	if err != nil {
		resp.InputError = err.Error()
		return
	}
	structured.EnableAllocators(req.Allocators...)
	ctx := context.Background()
	cache := celCache(f)
	lister := classLister(req.Classes)
	nodes := make([]*v1.Node, len(req.Nodes))
	for i, n := range req.Nodes {
		nodes[i] = n.object()
	}
	placements := make([]string, len(req.Claims))
	allocated, next := 0, 0
	start := time.Now()
	for ci, claim := range req.Claims {
		alloc, err := structured.NewAllocator(ctx, f, state, lister, req.Slices, cache)
		if err != nil {
			resp.InputError = err.Error()
			return
		}
		resp.Channel = channelOf(alloc)
		for k := range nodes {
			node := nodes[(next+k)%len(nodes)]
			results, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
			if err != nil {
				if errors.Is(err, structured.ErrFailedAllocationOnNode) {
					continue
				}
				msg := fmt.Sprintf("claim #%d on node %s: %v", ci, node.Name, err)
				resp.Error = &msg
				return
			}
			if results == nil {
				continue
			}
			for _, r := range results[0].Devices.Results {
				id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
				if r.ShareID == nil {
					state.AllocatedDevices.Insert(id)
					continue
				}
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
			}
			placements[ci] = node.Name
			allocated++
			next = (next + k + 1) % len(nodes)
			break
		}
	}
	resp.Nanos = time.Since(start).Nanoseconds()
	resp.Allocated = &allocated
	resp.Placements = placements
}

func handle(line []byte) (resp response) {
	var req request
	strict, err := kjson.UnmarshalStrict(line, &req, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err == nil && len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		sort.Strings(msgs)
		err = errors.New(strings.Join(msgs, "; "))
	}
	resp.ID = req.ID
	if err != nil {
		resp.InputError = "decode: " + err.Error()
		return resp
	}
	defer func() {
		if p := recover(); p != nil {
			resp.Panic = fmt.Sprint(p)
		}
	}()
	switch req.Op {
	case "", "allocate":
		allocate(&req, &resp)
	case "workload":
		workload(&req, &resp)
	default:
		resp.InputError = fmt.Sprintf("unknown op %q", req.Op)
	}
	return resp
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			if encErr := enc.Encode(handle(line)); encErr != nil {
				fmt.Fprintln(os.Stderr, "oracle: encode:", encErr)
				os.Exit(2)
			}
			if flushErr := out.Flush(); flushErr != nil {
				os.Exit(2)
			}
		}
		if err != nil {
			return
		}
	}
}
