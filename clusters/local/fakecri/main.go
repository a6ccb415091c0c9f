// Command fakecri is the container runtime of drakit's real-kubelet nodes: a CRI v1 server on a
// Unix socket, built on the in-memory fakes of k8s.io/cri-client/pkg/fake, that runs no process.
//
// What a kubelet needs of it, beyond the fakes: every image is present with a non-zero size;
// RuntimeConfig says cgroupfs; ImageFsInfo names a real folder; each container has a real log
// file (an empty LogPath makes the kubelet's container-log GC glob "*" in its working directory
// and delete what it finds). Every RunPodSandbox, CreateContainer, StopPodSandbox and
// RemovePodSandbox is appended to --record as one JSON line; a CreateContainer line holds the CDI
// device IDs the kubelet passed and the env, mounts and device nodes the container gets once those
// IDs are resolved against --cdi-dir, as a CDI-enabled runtime would. An ID that does not resolve
// fails CreateContainer, as it does in containerd and CRI-O. With --api-server (the node's
// credentials), an init container exits with code 0 as soon as it is started (pods.go).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
)

const (
	imageSize   = 10 << 20
	fakeVersion = "0.1.0"
)

type server struct {
	*fake.RemoteRuntime
	cdiDirs []string
	fsDir   string

	pods *podSpecs // nil: no API server given, every container runs until stopped

	mu       sync.Mutex
	record   *os.File
	logPaths map[string]string // container ID -> its log file
	inits    map[string]bool   // container IDs of init containers (they exit 0 when started)
	events   *eventHub         // GetContainerEvents subscribers (events.go)
}

type event struct {
	Time       string         `json:"time"`
	Event      string         `json:"event"`
	SandboxID  string         `json:"podSandboxId,omitempty"`
	Pod        map[string]any `json:"pod,omitempty"`
	Container  string         `json:"container,omitempty"`
	Attempt    uint32         `json:"attempt,omitempty"`
	Image      string         `json:"image,omitempty"`
	CDIDevices []string       `json:"cdiDevices,omitempty"`
	Requested  *effective     `json:"requested,omitempty"`
	Effective  *effective     `json:"effective,omitempty"`
	Warnings   []string       `json:"warnings,omitempty"`
	Error      string         `json:"error,omitempty"`
}

func (s *server) write(e event) {
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(e)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.record.Write(append(line, '\n'))
}

func podOf(c *runtimeapi.PodSandboxConfig) map[string]any {
	m := c.GetMetadata()
	if m == nil {
		return nil
	}
	return map[string]any{"namespace": m.Namespace, "name": m.Name, "uid": m.Uid, "attempt": m.Attempt}
}

func (s *server) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "drakit-fakecri", RuntimeVersion: fakeVersion,
		RuntimeApiVersion: "v1"}, nil
}

func (s *server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	resp, err := s.RemoteRuntime.RunPodSandbox(ctx, req)
	e := event{Event: "RunPodSandbox", Pod: podOf(req.Config)}
	if err != nil {
		e.Error = err.Error()
	} else {
		e.SandboxID = resp.PodSandboxId
	}
	s.write(e)
	return resp, err
}

func (s *server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	resp, err := s.RemoteRuntime.StopPodSandbox(ctx, req)
	e := event{Event: "StopPodSandbox", SandboxID: req.PodSandboxId}
	if err != nil {
		e.Error = err.Error()
	} else {
		s.emitSandbox(req.PodSandboxId, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
	s.write(e)
	return resp, err
}

func (s *server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	resp, err := s.RemoteRuntime.RemovePodSandbox(ctx, req)
	s.write(event{Event: "RemovePodSandbox", SandboxID: req.PodSandboxId})
	return resp, err
}

func (s *server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	e := event{Event: "CreateContainer", SandboxID: req.PodSandboxId, Pod: podOf(req.SandboxConfig),
		Container: cfg.GetMetadata().GetName(), Attempt: cfg.GetMetadata().GetAttempt(), Image: cfg.GetImage().GetImage()}
	base := effective{Env: []string{}, Mounts: []Mount{}, DeviceNodes: []DeviceNode{}}
	for _, kv := range cfg.GetEnvs() {
		base.Env = append(base.Env, kv.Key+"="+string(kv.Value))
	}
	for _, m := range cfg.GetMounts() {
		base.Mounts = append(base.Mounts, Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.Readonly, Source: "kubelet"})
	}
	for _, d := range cfg.GetDevices() {
		base.DeviceNodes = append(base.DeviceNodes, DeviceNode{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions, Source: "kubelet"})
	}
	for _, d := range cfg.GetCDIDevices() {
		e.CDIDevices = append(e.CDIDevices, d.GetName())
	}
	requested := effective{Env: append([]string{}, base.Env...), Mounts: append([]Mount{}, base.Mounts...),
		DeviceNodes: append([]DeviceNode{}, base.DeviceNodes...)}
	e.Requested = &requested
	eff, warnings, err := applyCDI(base, e.CDIDevices, s.cdiDirs)
	e.Warnings = warnings
	if err != nil {
		e.Error = err.Error()
		s.write(e)
		return nil, err
	}
	e.Effective = &eff
	resp, err := s.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		e.Error = err.Error()
		s.write(e)
		return nil, err
	}
	if logPath := s.logPath(req); logPath != "" {
		if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err == nil {
			if f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640); err == nil {
				f.Close()
			}
		}
		s.mu.Lock()
		s.logPaths[resp.ContainerId] = logPath
		s.mu.Unlock()
	}
	if m := req.GetSandboxConfig().GetMetadata(); m != nil && s.pods.initContainers(m.Namespace, m.Name, m.Uid)[e.Container] {
		s.mu.Lock()
		s.inits[resp.ContainerId] = true
		s.mu.Unlock()
	}
	s.write(e)
	return resp, nil
}

// StartContainer runs nothing; an init container completes at once (exit code 0).
func (s *server) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	resp, err := s.RemoteRuntime.StartContainer(ctx, req)
	if err != nil {
		return resp, err
	}
	s.mu.Lock()
	init := s.inits[req.ContainerId]
	s.mu.Unlock()
	s.emit(req.ContainerId, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	if init {
		rs := s.RemoteRuntime.RuntimeService
		rs.Lock()
		if c, ok := rs.Containers[req.ContainerId]; ok {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			c.ExitCode = 0
			c.Reason = "Completed"
			c.FinishedAt = time.Now().UnixNano()
		}
		rs.Unlock()
		s.emit(req.ContainerId, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
	return resp, nil
}

// logPath is the sandbox's log directory joined with the container's log path, as runtimes do.
func (s *server) logPath(req *runtimeapi.CreateContainerRequest) string {
	dir := req.GetSandboxConfig().GetLogDirectory()
	rel := req.GetConfig().GetLogPath()
	if dir == "" || rel == "" {
		return ""
	}
	return filepath.Join(dir, rel)
}

func (s *server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := s.RemoteRuntime.ContainerStatus(ctx, req)
	if err == nil && resp.Status != nil {
		s.mu.Lock()
		resp.Status.LogPath = s.logPaths[req.ContainerId]
		s.mu.Unlock()
	}
	return resp, err
}

func (s *server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	resp, err := s.RemoteRuntime.RemoveContainer(ctx, req)
	if err == nil {
		s.mu.Lock()
		if p := s.logPaths[req.ContainerId]; p != "" {
			_ = os.Remove(p)
		}
		delete(s.logPaths, req.ContainerId)
		delete(s.inits, req.ContainerId)
		s.mu.Unlock()
	}
	return resp, err
}

// Every image is present: the kubelet never pulls, and sees a non-zero size.
func (s *server) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	resp, err := s.RemoteRuntime.ImageStatus(ctx, req)
	if err == nil && resp.Image == nil && req.GetImage().GetImage() != "" {
		if _, err := s.RemoteRuntime.PullImage(ctx, &runtimeapi.PullImageRequest{Image: req.Image}); err == nil {
			return s.RemoteRuntime.ImageStatus(ctx, req)
		}
	}
	return resp, err
}

func (s *server) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	usage := func() []*runtimeapi.FilesystemUsage {
		return []*runtimeapi.FilesystemUsage{{
			Timestamp:  time.Now().UnixNano(),
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: s.fsDir},
			UsedBytes:  &runtimeapi.UInt64Value{Value: imageSize},
			InodesUsed: &runtimeapi.UInt64Value{Value: 1},
		}}
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: usage(), ContainerFilesystems: usage()}, nil
}

// trim keeps the fakes' call logs from growing for the life of a node.
func (s *server) trim() {
	rs, is := s.RemoteRuntime.RuntimeService, s.RemoteRuntime.ImageService
	rs.Lock()
	rs.Called = rs.Called[:0]
	rs.Unlock()
	is.Lock()
	is.Called = is.Called[:0]
	is.Unlock()
}

func main() {
	listen := flag.String("listen", "", "Unix socket path to serve CRI v1 on")
	cdi := flag.String("cdi-dir", "", "CDI spec folders, comma-separated, lowest priority first")
	record := flag.String("record", "", "file the runtime appends its JSON-lines record to")
	fsDir := flag.String("fs-dir", "", "folder reported as the image and container filesystem")
	version := flag.Bool("version", false, "print the version and exit")
	apiServer := flag.String("api-server", "", "API server URL to read pod specs from (which containers are init containers)")
	caFile := flag.String("ca", "", "CA bundle of --api-server")
	certFile := flag.String("cert", "", "client certificate for --api-server (the node's)")
	keyFile := flag.String("key", "", "client key for --api-server")
	flag.Parse()
	if *version {
		fmt.Println("drakit-fakecri " + fakeVersion)
		return
	}
	if *listen == "" || *record == "" || *fsDir == "" {
		fmt.Fprintln(os.Stderr, "fakecri: --listen, --record and --fs-dir are required")
		os.Exit(2)
	}
	rec, err := os.OpenFile(*record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakecri: %v\n", err)
		os.Exit(1)
	}
	pods, err := newPodSpecs(*apiServer, *caFile, *certFile, *keyFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakecri: --api-server credentials: %v\n", err)
		os.Exit(1)
	}
	s := &server{RemoteRuntime: fake.NewFakeRemoteRuntime(), fsDir: *fsDir, record: rec, logPaths: map[string]string{},
		inits: map[string]bool{}, pods: pods, events: newEventHub()}
	for _, d := range strings.Split(*cdi, ",") {
		if d = strings.TrimSpace(d); d != "" {
			s.cdiDirs = append(s.cdiDirs, d)
		}
	}
	s.RuntimeService.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}
	s.RuntimeService.FakeLinuxConfiguration = &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}
	s.ImageService.SetFakeImageSize(imageSize)

	_ = os.Remove(*listen)
	old := syscall.Umask(0o077)
	l, err := net.Listen("unix", *listen)
	syscall.Umask(old)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakecri: listen on %s: %v\n", *listen, err)
		os.Exit(1)
	}
	g := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(g, s)
	runtimeapi.RegisterImageServiceServer(g, s)
	go func() {
		for range time.Tick(time.Minute) {
			s.trim()
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		g.Stop()
	}()
	fmt.Fprintf(os.Stderr, "fakecri: serving CRI v1 on %s; record %s; CDI %v\n", *listen, *record, s.cdiDirs)
	if err := g.Serve(l); err != nil {
		fmt.Fprintf(os.Stderr, "fakecri: %v\n", err)
	}
	_ = os.Remove(*listen)
	rec.Close()
}
