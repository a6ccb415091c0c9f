package main

// Resolution of CDI device IDs against a node's CDI spec folders, as a container runtime does
// before it creates a container: the container's effective env, mounts and device nodes.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

type cdiSpec struct {
	CDIVersion     string            `json:"cdiVersion"`
	Kind           string            `json:"kind"`
	Annotations    map[string]string `json:"annotations,omitempty"`
	Devices        []cdiDevice       `json:"devices"`
	ContainerEdits containerEdits    `json:"containerEdits"`
}

type cdiDevice struct {
	Name           string            `json:"name"`
	Annotations    map[string]string `json:"annotations,omitempty"`
	ContainerEdits containerEdits    `json:"containerEdits"`
}

type containerEdits struct {
	Env            []string        `json:"env,omitempty"`
	DeviceNodes    []cdiDeviceNode `json:"deviceNodes,omitempty"`
	Mounts         []cdiMount      `json:"mounts,omitempty"`
	Hooks          []any           `json:"hooks,omitempty"`
	AdditionalGIDs []any           `json:"additionalGids,omitempty"`
	IntelRdt       any             `json:"intelRdt,omitempty"`
	NetDevices     []any           `json:"netDevices,omitempty"`
}

type cdiDeviceNode struct {
	Path        string `json:"path"`
	HostPath    string `json:"hostPath,omitempty"`
	Type        string `json:"type,omitempty"`
	Major       int64  `json:"major,omitempty"`
	Minor       int64  `json:"minor,omitempty"`
	FileMode    any    `json:"fileMode,omitempty"`
	Permissions string `json:"permissions,omitempty"`
	UID         any    `json:"uid,omitempty"`
	GID         any    `json:"gid,omitempty"`
}

type cdiMount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Type          string   `json:"type,omitempty"`
	Options       []string `json:"options,omitempty"`
}

// Mount / DeviceNode as recorded: what the container sees and where it comes from.
type Mount struct {
	ContainerPath string   `json:"containerPath"`
	HostPath      string   `json:"hostPath"`
	ReadOnly      bool     `json:"readOnly,omitempty"`
	Options       []string `json:"options,omitempty"`
	Source        string   `json:"source"` // "kubelet" or the CDI device ID
}

type DeviceNode struct {
	ContainerPath string `json:"containerPath"`
	HostPath      string `json:"hostPath"`
	Permissions   string `json:"permissions,omitempty"`
	Source        string `json:"source"`
}

type resolved struct {
	spec   *cdiSpec
	device *cdiDevice
}

// loadCDI reads every .json/.yaml spec of the folders; later folders override earlier ones, and a
// device defined twice in one folder is a conflict (both dropped), as in the CDI reference cache.
func loadCDI(dirs []string) (map[string]resolved, []string) {
	out := map[string]resolved{}
	var problems []string
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !os.IsNotExist(err) {
				problems = append(problems, fmt.Sprintf("%s: %v", dir, err))
			}
			continue
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if !e.IsDir() && (ext == ".json" || ext == ".yaml") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		inDir := map[string]resolved{}
		conflicts := map[string]bool{}
		for _, name := range names {
			path := filepath.Join(dir, name)
			data, err := os.ReadFile(path)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", path, err))
				continue
			}
			spec := &cdiSpec{}
			if err := yaml.UnmarshalStrict(data, spec); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", path, err))
				continue
			}
			if !strings.Contains(spec.Kind, "/") {
				problems = append(problems, fmt.Sprintf("%s: kind %q is not vendor/class", path, spec.Kind))
				continue
			}
			for i := range spec.Devices {
				id := spec.Kind + "=" + spec.Devices[i].Name
				if _, dup := inDir[id]; dup {
					conflicts[id] = true
				}
				inDir[id] = resolved{spec, &spec.Devices[i]}
			}
		}
		for id := range conflicts {
			problems = append(problems, fmt.Sprintf("%s: device %s defined twice; ignored", dir, id))
			delete(inDir, id)
		}
		for id, r := range inDir {
			out[id] = r
		}
	}
	return out, problems
}

// effective is what the workload would see: the kubelet's env/mounts/devices plus the CDI edits
// of each requested device (spec-level edits once per spec, then the device's).
type effective struct {
	Env         []string     `json:"env"`
	Mounts      []Mount      `json:"mounts"`
	DeviceNodes []DeviceNode `json:"deviceNodes"`
}

func applyCDI(base effective, ids []string, dirs []string) (effective, []string, error) {
	specs, problems := loadCDI(dirs)
	var unresolved []string
	seenSpec := map[*cdiSpec]bool{}
	env := map[string]int{}
	for i, kv := range base.Env {
		env[envKey(kv)] = i
	}
	add := func(edits containerEdits, source string) {
		for _, kv := range edits.Env {
			if i, ok := env[envKey(kv)]; ok {
				base.Env[i] = kv
			} else {
				env[envKey(kv)] = len(base.Env)
				base.Env = append(base.Env, kv)
			}
		}
		for _, m := range edits.Mounts {
			base.Mounts = append(base.Mounts, Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath,
				ReadOnly: contains(m.Options, "ro"), Options: m.Options, Source: source})
		}
		for _, d := range edits.DeviceNodes {
			host := d.HostPath
			if host == "" {
				host = d.Path
			}
			base.DeviceNodes = append(base.DeviceNodes, DeviceNode{ContainerPath: d.Path, HostPath: host,
				Permissions: d.Permissions, Source: source})
		}
	}
	for _, id := range ids {
		r, ok := specs[id]
		if !ok {
			unresolved = append(unresolved, id)
			continue
		}
		if !seenSpec[r.spec] {
			seenSpec[r.spec] = true
			add(r.spec.ContainerEdits, id)
		}
		add(r.device.ContainerEdits, id)
	}
	if len(unresolved) > 0 {
		return base, problems, fmt.Errorf("CDI device injection failed: unresolvable CDI devices %s",
			strings.Join(unresolved, ", "))
	}
	return base, problems, nil
}

func envKey(kv string) string {
	k, _, _ := strings.Cut(kv, "=")
	return k
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
