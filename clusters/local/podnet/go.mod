// drakit's pod-network CNI plugin (main.go: a veth pair with both ends inside the pod's network
// namespace, addressed by host-local IPAM; nothing is created in the host's namespace), and the
// CNI host-local and loopback plugins it needs, from the Go module proxy.

module drakit.local/podnet

go 1.26.0

tool (
	github.com/containernetworking/plugins/plugins/ipam/host-local
	github.com/containernetworking/plugins/plugins/main/loopback
)

require (
	github.com/containernetworking/cni v1.3.0
	github.com/containernetworking/plugins v1.9.1
	github.com/vishvananda/netlink v1.3.1
)

require (
	github.com/alexflint/go-filemutex v1.3.0 // indirect
	github.com/coreos/go-iptables v0.8.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/safchain/ethtool v0.6.2 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/sys v0.35.0 // indirect
	sigs.k8s.io/knftables v0.0.18 // indirect
)
