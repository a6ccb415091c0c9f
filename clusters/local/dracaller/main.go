// Command dracaller calls a DRA kubelet plugin's NodePrepareResources and
// NodeUnprepareResources over its Unix socket the way the kubelet does (one
// gRPC connection, "unix:" target, insecure credentials, concurrent calls from
// goroutines sharing the connection) and prints the latency of every call as
// JSON. It is drakit's benchmark caller (benchmarks/bench_grpc.py), built by
// clusters/local/build.py: a Go caller costs the shared CPU far less than a
// Python one, so the figures are the server's.
//
// Claims are named as bench_grpc.py names them: namespace --namespace, name
// "<prefix><i>", UID "00000000-0000-4000-8000-<i as 12 digits>".
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

const version = "drakit-dracaller 0.1.0"

type caller struct {
	client    drapb.DRAPluginClient
	namespace string
	prefix    string
	timeout   time.Duration
	mu        sync.Mutex
	errors    int
	firstErr  string
}

func (c *caller) claims(first, n int) []*drapb.Claim {
	out := make([]*drapb.Claim, n)
	for k := range n {
		i := first + k
		out[k] = &drapb.Claim{Namespace: c.namespace, Name: c.prefix + strconv.Itoa(i),
			Uid: fmt.Sprintf("00000000-0000-4000-8000-%012d", i)}
	}
	return out
}

func (c *caller) fail(n int, msg string) {
	c.mu.Lock()
	c.errors += n
	if c.firstErr == "" {
		c.firstErr = msg
	}
	c.mu.Unlock()
}

func (c *caller) prepare(first, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	resp, err := c.client.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: c.claims(first, n)})
	if err != nil {
		c.fail(n, "NodePrepareResources: "+err.Error())
		return
	}
	for uid, r := range resp.GetClaims() {
		if r.GetError() != "" {
			c.fail(1, uid+": "+r.GetError())
		}
	}
	if len(resp.GetClaims()) != n {
		c.fail(1, fmt.Sprintf("NodePrepareResources answered %d of %d claims", len(resp.GetClaims()), n))
	}
}

func (c *caller) unprepare(first, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	resp, err := c.client.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: c.claims(first, n)})
	if err != nil {
		c.fail(n, "NodeUnprepareResources: "+err.Error())
		return
	}
	for uid, r := range resp.GetClaims() {
		if r.GetError() != "" {
			c.fail(1, uid+": "+r.GetError())
		}
	}
}

func (c *caller) cycle(i int) { c.prepare(i, 1); c.unprepare(i, 1) }

// entry is one row of the output: every sample in seconds, the wall time of
// the whole row and the server's CPU seconds during it (when --server-pid).
type entry struct {
	Samples   []float64 `json:"samples"`
	Wall      float64   `json:"wall"`
	ServerCPU *float64  `json:"server_cpu,omitempty"`
}

// cpuSeconds is the user+system CPU of a process so far (/proc/<pid>/stat, USER_HZ 100).
func cpuSeconds(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(fields[11])
	k, _ := strconv.Atoi(fields[12])
	return float64(u+k) / 100
}

// run times `count` calls of fn (item numbers first, first+1, ...) in `workers` goroutines.
func run(workers, first, count, serverPid int, fn func(int)) entry {
	samples := make([]float64, count)
	var wg sync.WaitGroup
	cpu0 := cpuSeconds(serverPid)
	t0 := time.Now()
	share := (count + workers - 1) / workers
	for w := range workers {
		lo, hi := w*share, min(count, (w+1)*share)
		wg.Go(func() {
			for k := lo; k < hi; k++ {
				s := time.Now()
				fn(first + k)
				samples[k] = time.Since(s).Seconds()
			}
		})
	}
	wg.Wait()
	e := entry{Samples: samples, Wall: time.Since(t0).Seconds()}
	if serverPid > 0 {
		cpu := cpuSeconds(serverPid) - cpu0
		e.ServerCPU = &cpu
	}
	return e
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			n, err := strconv.Atoi(f)
			if err != nil || n < 0 {
				fmt.Fprintf(os.Stderr, "dracaller: not a list of counts: %q\n", s)
				os.Exit(2)
			}
			out = append(out, n)
		}
	}
	return out
}

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	socket := flag.String("socket", "", "the plugin's DRA socket (required)")
	namespace := flag.String("namespace", "bench", "claims' namespace")
	prefix := flag.String("prefix", "bench-", "claims' name prefix")
	first := flag.Int("first", 1, "number of the first claim used")
	calls := flag.Int("calls", 1000, "prepare+unprepare cycles per row")
	warmup := flag.Int("warmup", 200, "untimed cycles before the rows")
	callers := flag.String("callers", "1", "rows of cycles with this many concurrent goroutines, e.g. 1,4,8")
	batch := flag.Int("batch", 32, "claims per call in the batched row (0: no such row)")
	prepared := flag.String("prepared", "", "time a new claim's prepare with this many already prepared, e.g. 0,500,5000")
	probe := flag.Int("probe", 200, "new claims timed at each --prepared level")
	serverPid := flag.Int("server-pid", 0, "measure this process's CPU during each row")
	timeout := flag.Duration("timeout", 30*time.Second, "timeout of each call")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	if *socket == "" {
		fmt.Fprintln(os.Stderr, "dracaller: --socket is required")
		os.Exit(2)
	}
	conn, err := grpc.NewClient("unix:"+*socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "dracaller: %s: %v\n", *socket, err)
		os.Exit(1)
	}
	defer conn.Close()
	c := &caller{client: drapb.NewDRAPluginClient(conn), namespace: *namespace, prefix: *prefix, timeout: *timeout}

	// Wait for the server (up to --timeout) with a first call, on claim 0.
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	_, err = c.client.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: c.claims(0, 1)},
		grpc.WaitForReady(true))
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dracaller: %s does not answer: %v\n", *socket, err)
		os.Exit(1)
	}

	out := map[string]any{}
	next := *first
	for i := next; i < next+*warmup; i++ {
		c.cycle(i)
	}
	next += *warmup
	for _, k := range ints(*callers) {
		if k < 1 {
			continue
		}
		key := "cycle"
		if k > 1 {
			key = fmt.Sprintf("cycle x%d", k)
		}
		out[key] = run(k, next, *calls, *serverPid, c.cycle)
		next += *calls
	}
	if *batch > 0 {
		b := *batch
		batches := max(1, *calls/b)
		base := next
		out[fmt.Sprintf("%d claims a call", b)] = run(1, 0, batches, *serverPid, func(j int) {
			c.prepare(base+j*b, b)
			c.unprepare(base+j*b, b)
		})
		next += batches * b
	}
	held := 0
	for _, level := range ints(*prepared) {
		for i := next + held; i < next+level; i++ {
			c.prepare(i, 1)
		}
		held = max(held, level)
		probeFirst := next + held
		out[fmt.Sprintf("new claim @%d", level)] = run(1, probeFirst, *probe, 0, func(i int) { c.prepare(i, 1) })
		for i := probeFirst; i < probeFirst+*probe; i++ {
			c.unprepare(i, 1)
		}
	}
	for i := next; i < next+held; i++ { // leave nothing prepared
		c.unprepare(i, 1)
	}
	out["errors"] = c.errors
	if c.firstErr != "" {
		out["first_error"] = c.firstErr
	}
	out["caller"] = version
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
