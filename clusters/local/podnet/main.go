// drakit-podnet: a CNI plugin that gives a pod an address without touching the host's network.
//
// ADD creates a veth pair whose two ends both live inside the pod's network namespace (the
// interface the runtime names, usually eth0, and its peer "podnet0"), asks the IPAM plugin of
// the network configuration (host-local) for an address, and configures it on the pod's end.
// The pod can reach itself and nothing else: enough for a container runtime that wants an
// address on eth0, and no link, route or rule appears in the host's namespace. DEL releases the
// address and removes the pair (gone with the namespace anyway). CHECK verifies the interface.
package main

import (
	"encoding/json"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

const (
	pluginVersion = "0.1.0"
	peerName      = "podnet0"
)

type netConf struct {
	types.NetConf
	MTU int `json:"mtu"`
}

func loadConf(data []byte) (*netConf, error) {
	conf := &netConf{}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, fmt.Errorf("podnet: cannot parse the network configuration: %v", err)
	}
	if conf.IPAM.Type == "" {
		return nil, fmt.Errorf("podnet: the network configuration names no ipam plugin")
	}
	if conf.MTU == 0 {
		conf.MTU = 1500
	}
	return conf, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	conf, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return fmt.Errorf("podnet: cannot open the pod's network namespace %q: %v", args.Netns, err)
	}
	defer netns.Close()

	r, err := ipam.ExecAdd(conf.IPAM.Type, args.StdinData)
	if err != nil {
		return err
	}
	release := func() { _ = ipam.ExecDel(conf.IPAM.Type, args.StdinData) }
	result, err := current.NewResultFromResult(r)
	if err != nil {
		release()
		return err
	}
	if len(result.IPs) == 0 {
		release()
		return fmt.Errorf("podnet: the ipam plugin %q gave no address", conf.IPAM.Type)
	}
	var mac net.HardwareAddr
	err = netns.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: args.IfName, MTU: conf.MTU}, PeerName: peerName}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("podnet: cannot add the veth pair %s/%s: %v", args.IfName, peerName, err)
		}
		for _, name := range []string{peerName, args.IfName} {
			link, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(link); err != nil {
				return fmt.Errorf("podnet: cannot set %s up: %v", name, err)
			}
			if name == args.IfName {
				mac = link.Attrs().HardwareAddr
			}
		}
		result.Interfaces = []*current.Interface{{Name: args.IfName, Mac: mac.String(), Sandbox: args.Netns}}
		for _, ipc := range result.IPs {
			ipc.Interface = current.Int(0)
		}
		return ipam.ConfigureIface(args.IfName, result)
	})
	if err != nil {
		release()
		return err
	}
	result.DNS = conf.DNS
	return types.PrintResult(result, conf.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	conf, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	if err := ipam.ExecDel(conf.IPAM.Type, args.StdinData); err != nil {
		return err
	}
	if args.Netns == "" {
		return nil
	}
	// The pair lives only in the pod's namespace: a namespace already gone took it along.
	_ = ns.WithNetNSPath(args.Netns, func(ns.NetNS) error {
		if link, err := netlink.LinkByName(args.IfName); err == nil {
			return netlink.LinkDel(link)
		}
		return nil
	})
	return nil
}

func cmdCheck(args *skel.CmdArgs) error {
	if _, err := loadConf(args.StdinData); err != nil {
		return err
	}
	return ns.WithNetNSPath(args.Netns, func(ns.NetNS) error {
		_, err := netlink.LinkByName(args.IfName)
		return err
	})
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck}, version.All,
		"drakit-podnet "+pluginVersion)
}
