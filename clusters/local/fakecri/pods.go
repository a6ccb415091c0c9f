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
	// The Node authorizer lets the node read a pod only once its graph has seen the pod bound
	// there, which can lag the kubelet's own watch by a moment: a refusal is asked again for
	// up to two seconds (else an init container would be taken for a main one and never end).
	u := fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s", p.server, url.PathEscape(namespace), url.PathEscape(name))
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		r, err := p.client.Get(u)
		if err != nil {
			return nil
		}
		if r.StatusCode == http.StatusOK {
			resp = r
			break
		}
		r.Body.Close()
		if (r.StatusCode != http.StatusForbidden && r.StatusCode != http.StatusNotFound) || attempt >= 40 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer resp.Body.Close()
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
