package main

// Which containers of a pod are init containers (they run to completion before the others
// start). A CRI request does not say, so the runtime asks the API server, as the node (its
// kubelet's client certificate): the pod's spec.initContainers, leaving out restartable
// (sidecar) ones. Such a container "exits" with code 0 as soon as it is started.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

type podSpecs struct {
	server string
	client *http.Client
	mu     sync.Mutex
	cache  map[string]map[string]bool // pod UID -> init container names
}

func newPodSpecs(server, ca, cert, key string) (*podSpecs, error) {
	if server == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", ca)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool}}
	return &podSpecs{server: server, client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		cache: map[string]map[string]bool{}}, nil
}

// initContainers of the pod (namespace/name, checked against its UID); nil on any error.
func (p *podSpecs) initContainers(namespace, name, uid string) map[string]bool {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if got, ok := p.cache[uid]; ok {
		p.mu.Unlock()
		return got
	}
	p.mu.Unlock()
	resp, err := p.client.Get(fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s", p.server, url.PathEscape(namespace), url.PathEscape(name)))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var pod struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
		Spec struct {
			InitContainers []struct {
				Name          string `json:"name"`
				RestartPolicy string `json:"restartPolicy"`
			} `json:"initContainers"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&pod); err != nil || pod.Metadata.UID != uid {
		return nil
	}
	out := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != "Always" {
			out[c.Name] = true
		}
	}
	p.mu.Lock()
	if len(p.cache) > 10000 {
		p.cache = map[string]map[string]bool{}
	}
	p.cache[uid] = out
	p.mu.Unlock()
	return out
}
