// Command probe is powercut's small HTTP test application for kind clusters.
//
//	GET  /            200 "<pod> on <node>"
//	GET  /healthz     200 while the process runs (liveness)
//	GET  /readyz      200 once started and every volume directory is writable, 503 otherwise
//	PUT  /tokens/NAME write the request body as the token of volume NAME (fsync'd)
//	GET  /tokens/NAME the token of volume NAME, 404 if the volume holds none
//
// Volumes are the directories under $PROBE_VOLUMES (default /data), one per volume name.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

const tokenFile = "powercut-token"

var validName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func volumesDir() string {
	if d := os.Getenv("PROBE_VOLUMES"); d != "" {
		return d
	}
	return "/data"
}

func volumePath(name string) (string, error) {
	if !validName.MatchString(name) {
		return "", fmt.Errorf("volume name %q is not a DNS label", name)
	}
	dir := filepath.Join(volumesDir(), name)
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("volume %q is not mounted at %s", name, dir)
	}
	return dir, nil
}

func ready() error {
	entries, err := os.ReadDir(volumesDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		probe := filepath.Join(volumesDir(), e.Name(), ".probe-ready")
		if err := os.WriteFile(probe, []byte("ok"), 0o644); err != nil {
			return fmt.Errorf("volume %s not writable: %w", e.Name(), err)
		}
	}
	return nil
}

func tokens(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/tokens/")
	dir, err := volumePath(name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	path := filepath.Join(dir, tokenFile)
	switch r.Method {
	case http.MethodGet:
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			http.Error(w, "no token on volume "+name, http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write(data)
	case http.MethodPut, http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, 4096))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f, err := os.CreateTemp(dir, ".token-*")
		if err == nil {
			_, err = f.Write(body)
			if err == nil {
				err = f.Sync()
			}
			f.Close()
			if err == nil {
				err = os.Rename(f.Name(), path)
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if d, err := os.Open(dir); err == nil {
			d.Sync()
			d.Close()
		}
		w.WriteHeader(http.StatusCreated)
	default:
		http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
	}
}

func main() {
	addr := os.Getenv("PROBE_ADDR")
	if addr == "" {
		addr = ":8080"
	}
	pod, node := os.Getenv("POD_NAME"), os.Getenv("NODE_NAME")
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s on %s\n", pod, node)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/tokens/", tokens)
	log.Printf("probe %s on %s listening on %s", pod, node, addr)
	log.Fatal(http.ListenAndServe(addr, mux))
}
