// Command lb is the API server load balancer of powercut's kind clusters with several
// control planes. kind runs its load balancer container from the image
// docker.io/envoyproxy/envoy (as `envoy -c /home/envoy/envoy.yaml`, in a bash loop) and
// writes the listener (lds.yaml: the port) and the cluster (cds.yaml: each control plane's
// host:port, health-checked with GET /healthz over TLS) into /home/envoy. Envoy is not
// served by the Go module proxy, so powercut builds this stand-in under that image name:
// it reads the same two files (again whenever they change), checks each backend's /healthz
// every second (TLS, certificate not verified, as kind configures envoy), and forwards each
// TCP connection to the next healthy backend, round robin.
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"
)

var (
	portRe    = regexp.MustCompile(`port_value:\s*(\d+)`)
	backendRe = regexp.MustCompile(`address:\s*"?([^\s"]+)"?\s*\n\s*port_value:\s*(\d+)`)
)

type balancer struct {
	mu       sync.Mutex
	backends []string
	healthy  map[string]bool
	next     int
}

func (b *balancer) set(backends []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if fmt.Sprint(backends) != fmt.Sprint(b.backends) {
		log.Printf("backends: %v", backends)
	}
	b.backends = backends
}

func (b *balancer) pick() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 0; i < len(b.backends); i++ {
		addr := b.backends[(b.next+i)%len(b.backends)]
		if b.healthy[addr] {
			b.next = (b.next + i + 1) % len(b.backends)
			return addr, true
		}
	}
	return "", false
}

func (b *balancer) check(client *http.Client) {
	b.mu.Lock()
	backends := append([]string(nil), b.backends...)
	b.mu.Unlock()
	state := map[string]bool{}
	for _, addr := range backends {
		resp, err := client.Get("https://" + addr + "/healthz")
		ok := err == nil && resp.StatusCode == http.StatusOK
		if err == nil {
			_ = resp.Body.Close()
		}
		state[addr] = ok
	}
	b.mu.Lock()
	for addr, ok := range state {
		if b.healthy[addr] != ok {
			log.Printf("backend %s healthy=%v", addr, ok)
		}
	}
	b.healthy = state
	b.mu.Unlock()
}

func proxy(c net.Conn, b *balancer) {
	defer c.Close()
	addr, ok := b.pick()
	if !ok {
		return
	}
	up, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		log.Printf("dial %s: %v", addr, err)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func main() {
	conf := "/home/envoy/envoy.yaml"
	for i, a := range os.Args {
		if a == "-c" && i+1 < len(os.Args) {
			conf = os.Args[i+1]
		}
		if a == "--version" {
			fmt.Println("powercut lb (envoy stand-in for kind's load balancer)")
			return
		}
	}
	dir := filepath.Dir(conf)
	b := &balancer{healthy: map[string]bool{}}
	client := &http.Client{
		Timeout: 3 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as kind's envoy
		},
	}
	listening := 0
	for {
		if lds, err := os.ReadFile(filepath.Join(dir, "lds.yaml")); err == nil {
			if m := portRe.FindSubmatch(lds); m != nil {
				port, _ := strconv.Atoi(string(m[1]))
				if port != listening && listening == 0 {
					ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
					if err != nil {
						log.Fatalf("listen :%d: %v", port, err)
					}
					log.Printf("listening on :%d", port)
					listening = port
					go func() {
						for {
							c, err := ln.Accept()
							if err != nil {
								log.Fatalf("accept: %v", err)
							}
							go proxy(c, b)
						}
					}()
				}
			}
		}
		if cds, err := os.ReadFile(filepath.Join(dir, "cds.yaml")); err == nil {
			var backends []string
			for _, m := range backendRe.FindAllSubmatch(cds, -1) {
				backends = append(backends, net.JoinHostPort(string(m[1]), string(m[2])))
			}
			b.set(backends)
		}
		b.check(client)
		time.Sleep(time.Second)
	}
}
