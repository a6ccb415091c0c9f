package main

// CRI container events (GetContainerEvents), as containerd and CRI-O send them: a kubelet with
// the EventedPLEG gate relists a pod as soon as one of its containers stopped, instead of at its
// next periodic relist (once a second). This runtime sends CONTAINER_STARTED_EVENT when a
// container starts, and CONTAINER_STOPPED_EVENT when one is stopped, an init container
// completes (at once: it runs nothing) or a sandbox is stopped. Subscribers that do not keep up lose events, never block
// the runtime; a kubelet relists every second anyway.

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type eventHub struct {
	mu   sync.Mutex
	subs map[chan *runtimeapi.ContainerEventResponse]struct{}
}

func newEventHub() *eventHub {
	return &eventHub{subs: map[chan *runtimeapi.ContainerEventResponse]struct{}{}}
}

func (h *eventHub) subscribe() chan *runtimeapi.ContainerEventResponse {
	ch := make(chan *runtimeapi.ContainerEventResponse, 256)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch
}

func (h *eventHub) unsubscribe(ch chan *runtimeapi.ContainerEventResponse) {
	h.mu.Lock()
	delete(h.subs, ch)
	h.mu.Unlock()
}

func (h *eventHub) publish(ev *runtimeapi.ContainerEventResponse) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// containerEvent is the event of the container's current state, with its sandbox's status (the
// kubelet ignores an event without one); nil when the container or its sandbox is unknown.
func (s *server) containerEvent(id string, kind runtimeapi.ContainerEventType) *runtimeapi.ContainerEventResponse {
	rs := s.RemoteRuntime.RuntimeService
	rs.Lock()
	defer rs.Unlock()
	c, ok := rs.Containers[id]
	if !ok {
		return nil
	}
	sb, ok := rs.Sandboxes[c.SandboxID]
	if !ok {
		return nil
	}
	// copies: the fake keeps changing its own
	sandbox := proto.Clone(&sb.PodSandboxStatus).(*runtimeapi.PodSandboxStatus)
	status := proto.Clone(&c.ContainerStatus).(*runtimeapi.ContainerStatus)
	return &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: kind, CreatedAt: time.Now().UnixNano(),
		PodSandboxStatus: sandbox, ContainersStatuses: []*runtimeapi.ContainerStatus{status}}
}

// emitSandbox sends the event of a sandbox (containerd sends its sandboxes' exits as container
// events with the sandbox's ID).
func (s *server) emitSandbox(id string, kind runtimeapi.ContainerEventType) {
	rs := s.RemoteRuntime.RuntimeService
	rs.Lock()
	sb, ok := rs.Sandboxes[id]
	var sandbox *runtimeapi.PodSandboxStatus
	if ok {
		sandbox = proto.Clone(&sb.PodSandboxStatus).(*runtimeapi.PodSandboxStatus)
	}
	rs.Unlock()
	if sandbox != nil {
		s.events.publish(&runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: kind,
			CreatedAt: time.Now().UnixNano(), PodSandboxStatus: sandbox})
	}
}

func (s *server) emit(id string, kind runtimeapi.ContainerEventType) {
	if ev := s.containerEvent(id, kind); ev != nil {
		s.events.publish(ev)
	}
}

func (s *server) GetContainerEvents(req *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	ch := s.events.subscribe()
	defer s.events.unsubscribe(ch)
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

// StopContainer stops the container (the fake runs nothing) and says so on the event stream.
func (s *server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	resp, err := s.RemoteRuntime.StopContainer(ctx, req)
	if err == nil {
		s.emit(req.ContainerId, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
	return resp, err
}
