// Command pcsi is powercut's CSI driver for kind clusters.
//
// A volume is a directory on storage that every node reaches (a host directory that
// `powercut kind up` bind-mounts into each kind node at the same path), and it is attached
// to one node at a time: ControllerPublishVolume records the node in the volume's
// attachment file and refuses a second node (FAILED_PRECONDITION, as a disk array refuses
// to map a LUN to two hosts), ControllerUnpublishVolume removes it, and NodeStageVolume
// mounts the volume only on the node it is attached to. So the real external-attacher,
// the attach/detach controller and the kubelet's volume manager decide when a volume
// moves, and its data moves with it.
//
// One binary, two modes:
//
//	pcsi --mode=controller --endpoint=unix:///csi/csi.sock --root=/var/lib/powercut-csi
//	pcsi --mode=node --endpoint=unix:///csi/csi.sock --root=/var/lib/powercut-csi \
//	     --node-id=$(NODE_NAME) --registration-dir=/registration \
//	     --kubelet-endpoint=/var/lib/kubelet/plugins/csi.powercut.io/csi.sock
//
// With --sshfs=user@host:dir (node mode) the data travels over the network: each volume is
// mounted with sshfs (FUSE over SSH) from dir/<id> on a storage server, so a node cut off
// its storage network loses its pods' I/O; the attachment records stay on --root.
//
// In node mode it also registers itself with the kubelet (the plugin registration API that
// node-driver-registrar serves elsewhere; the Go module proxy here does not serve it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const (
	driverName = "csi.powercut.io"
	version    = "v1"
)

var validID = regexp.MustCompile(`^[a-zA-Z0-9][-_.a-zA-Z0-9]{0,127}$`)

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	root   string
	nodeID string
	mode   string
	sshfs  string     // node mode: "user@host:dir", each volume mounted from dir/<id> over SSH
	sshDir string     // node mode: the client key (id_ed25519) and the server's known_hosts
	mu     sync.Mutex // one publish/unpublish at a time in this process (flock across)
}

func (d *driver) volumeDir(id string) string  { return filepath.Join(d.root, "volumes", id) }
func (d *driver) attachFile(id string) string { return filepath.Join(d.root, "attach", id) }

func checkID(id string) error {
	if !validID.MatchString(id) {
		return status.Errorf(codes.InvalidArgument, "invalid volume id %q", id)
	}
	return nil
}

// lock serialises attachment changes across processes (a controller being replaced).
func (d *driver) lock() (func(), error) {
	d.mu.Lock()
	f, err := os.OpenFile(filepath.Join(d.root, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		d.mu.Unlock()
		return nil, status.Errorf(codes.Internal, "lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		d.mu.Unlock()
		return nil, status.Errorf(codes.Internal, "lock: %v", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		d.mu.Unlock()
	}, nil
}

func (d *driver) attachedTo(id string) (string, error) {
	b, err := os.ReadFile(d.attachFile(id))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", status.Errorf(codes.Internal, "reading the attachment of %s: %v", id, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// -- identity ---------------------------------------------------------------------------

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: driverName, VendorVersion: version}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
			Type: csi.PluginCapability_Service_CONTROLLER_SERVICE,
		}},
	}}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if _, err := os.Stat(filepath.Join(d.root, "volumes")); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "shared storage: %v", err)
	}
	return &csi.ProbeResponse{}, nil
}

// -- controller -------------------------------------------------------------------------

func supported(caps []*csi.VolumeCapability) error {
	for _, c := range caps {
		if c.GetBlock() != nil {
			return status.Error(codes.InvalidArgument, "block volumes are not supported")
		}
		switch c.GetAccessMode().GetMode() {
		case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
			csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
			csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
			csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		default:
			return status.Errorf(codes.InvalidArgument, "access mode %s is not supported (one node at a time)",
				c.GetAccessMode().GetMode())
		}
	}
	return nil
}

func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	id := req.GetName()
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := supported(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(d.volumeDir(id), 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "creating %s: %v", id, err)
	}
	os.Chmod(d.volumeDir(id), 0o777) // any pod user may write, as local-path's
	size := req.GetCapacityRange().GetRequiredBytes()
	log.Printf("CreateVolume %s (%d bytes)", id, size)
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: size}}, nil
}

func (d *driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := checkID(id); err != nil {
		return nil, err
	}
	unlock, err := d.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if node, err := d.attachedTo(id); err != nil {
		return nil, err
	} else if node != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still attached to %s", id, node)
	}
	if err := os.RemoveAll(d.volumeDir(id)); err != nil {
		return nil, status.Errorf(codes.Internal, "deleting %s: %v", id, err)
	}
	log.Printf("DeleteVolume %s", id)
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	id, node := req.GetVolumeId(), req.GetNodeId()
	if err := checkID(id); err != nil {
		return nil, err
	}
	if node == "" {
		return nil, status.Error(codes.InvalidArgument, "no node id")
	}
	if err := supported([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	unlock, err := d.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := os.Stat(d.volumeDir(id)); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", id, err)
	}
	current, err := d.attachedTo(id)
	if err != nil {
		return nil, err
	}
	if current != "" && current != node {
		// As an array refuses to map a LUN to a second host: detach it from the first.
		return nil, status.Errorf(codes.FailedPrecondition,
			"volume %s is attached to node %s; detach it there first", id, current)
	}
	if current == "" {
		if err := writeFileSync(d.attachFile(id), []byte(node+"\n")); err != nil {
			return nil, status.Errorf(codes.Internal, "attaching %s: %v", id, err)
		}
		log.Printf("ControllerPublishVolume %s -> %s", id, node)
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"node": node}}, nil
}

func (d *driver) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	id, node := req.GetVolumeId(), req.GetNodeId()
	if err := checkID(id); err != nil {
		return nil, err
	}
	unlock, err := d.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	current, err := d.attachedTo(id)
	if err != nil {
		return nil, err
	}
	if current != "" && (node == "" || current == node) {
		if err := os.Remove(d.attachFile(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, status.Errorf(codes.Internal, "detaching %s: %v", id, err)
		}
		log.Printf("ControllerUnpublishVolume %s from %s", id, current)
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := checkID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if _, err := os.Stat(d.volumeDir(req.GetVolumeId())); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", req.GetVolumeId(), err)
	}
	if err := supported(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities(),
	}}, nil
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// -- node -------------------------------------------------------------------------------

func mounted(path string) (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	clean := filepath.Clean(path)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescape(f[4]) == clean {
			return true, nil
		}
	}
	return false, nil
}

func unescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

func bind(src, target string, readonly bool) error {
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, target, err)
	}
	if readonly {
		flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT | syscall.MS_RDONLY)
		if err := syscall.Mount("", target, "", flags, ""); err != nil {
			syscall.Unmount(target, syscall.MNT_DETACH)
			return fmt.Errorf("read-only remount of %s: %w", target, err)
		}
	}
	return nil
}

func unmount(target string) error {
	for {
		is, err := mounted(target)
		if err != nil {
			return err
		}
		if !is {
			return nil
		}
		if err := syscall.Unmount(target, 0); err != nil {
			if err := syscall.Unmount(target, syscall.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount %s: %w", target, err)
			}
		}
	}
}

// sshfsArgs is the sshfs command line that mounts volume id at target: host key checked,
// public-key login only, and an SSH keep-alive that fails the mount's I/O once the server
// has not answered for aliveInterval x aliveCount seconds (a cut storage network).
func (d *driver) sshfsArgs(id, target string) []string {
	opts := []string{
		"IdentityFile=" + filepath.Join(d.sshDir, "id_ed25519"),
		"UserKnownHostsFile=" + filepath.Join(d.sshDir, "known_hosts"),
		"StrictHostKeyChecking=yes",
		"BatchMode=yes",
		"ConnectTimeout=10",
		"ServerAliveInterval=5",
		"ServerAliveCountMax=3",
		"allow_other",
	}
	args := []string{d.sshfs + "/" + id, target}
	for _, o := range opts {
		args = append(args, "-o", o)
	}
	return args
}

// mountSSHFS mounts volume id at target over the storage network (sshfs daemonizes once
// the mount is up; it lives in this container, so the mount lives as long as it does).
func (d *driver) mountSSHFS(id, target string) error {
	out, err := exec.Command("sshfs", d.sshfsArgs(id, target)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sshfs %s/%s on %s: %v: %s", d.sshfs, id, target, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{
			Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		}},
	}}}, nil
}

func (d *driver) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := checkID(id); err != nil {
		return nil, err
	}
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "no staging target path")
	}
	// The data path's fence: only the node the volume is attached to may mount it.
	node, err := d.attachedTo(id)
	if err != nil {
		return nil, err
	}
	if node != d.nodeID {
		return nil, status.Errorf(codes.FailedPrecondition,
			"volume %s is attached to %q, not to this node %s", id, node, d.nodeID)
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "staging path: %v", err)
	}
	if is, err := mounted(staging); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	} else if is {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if d.sshfs != "" {
		if err := d.mountSSHFS(id, staging); err != nil {
			return nil, status.Errorf(codes.Unavailable, "%v", err)
		}
	} else if err := bind(d.volumeDir(id), staging, false); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	log.Printf("NodeStageVolume %s at %s", id, staging)
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *driver) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := checkID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := unmount(req.GetStagingTargetPath()); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	log.Printf("NodeUnstageVolume %s", req.GetVolumeId())
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, staging, target := req.GetVolumeId(), req.GetStagingTargetPath(), req.GetTargetPath()
	if err := checkID(id); err != nil {
		return nil, err
	}
	if staging == "" || target == "" {
		return nil, status.Error(codes.InvalidArgument, "staging and target paths are required")
	}
	if is, err := mounted(staging); err != nil || !is {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", id, staging)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "target path: %v", err)
	}
	if is, err := mounted(target); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	} else if is {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := bind(staging, target, req.GetReadonly()); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	log.Printf("NodePublishVolume %s at %s", id, target)
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := checkID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := unmount(req.GetTargetPath()); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if err := os.Remove(req.GetTargetPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing %s: %v", req.GetTargetPath(), err)
	}
	log.Printf("NodeUnpublishVolume %s", req.GetVolumeId())
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// -- kubelet plugin registration ----------------------------------------------------------

type registration struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
	failed   chan error
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              driverName,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !st.PluginRegistered {
		log.Printf("the kubelet refused the registration: %s", st.Error)
		r.failed <- errors.New(st.Error)
	} else {
		log.Printf("registered with the kubelet")
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}

func logged(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil {
		log.Printf("%s: %v", info.FullMethod, err)
	}
	return resp, err
}

func main() {
	mode := flag.String("mode", "", "controller or node")
	endpoint := flag.String("endpoint", "unix:///csi/csi.sock", "the CSI socket")
	root := flag.String("root", "/var/lib/powercut-csi", "the shared storage every node reaches")
	nodeID := flag.String("node-id", "", "this node's name (node mode)")
	regDir := flag.String("registration-dir", "", "the kubelet's plugins_registry, as mounted here (node mode)")
	kubeletEndpoint := flag.String("kubelet-endpoint", "", "the CSI socket's path on the node, for the kubelet (node mode)")
	sshfs := flag.String("sshfs", "", "node mode: mount each volume from user@host:dir/<id> with sshfs (else bind the shared root)")
	sshDir := flag.String("ssh-dir", "/etc/pcsi-ssh", "node mode with --sshfs: id_ed25519 and known_hosts")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if *mode != "controller" && *mode != "node" {
		log.Fatalf("--mode must be controller or node, not %q", *mode)
	}
	if *mode == "node" && (*nodeID == "" || *regDir == "" || *kubeletEndpoint == "") {
		log.Fatal("node mode needs --node-id, --registration-dir and --kubelet-endpoint")
	}
	for _, sub := range []string{"volumes", "attach"} {
		if err := os.MkdirAll(filepath.Join(*root, sub), 0o755); err != nil {
			log.Fatalf("shared storage %s: %v", *root, err)
		}
	}
	d := &driver{root: *root, nodeID: *nodeID, mode: *mode, sshfs: *sshfs, sshDir: *sshDir}
	sock := strings.TrimPrefix(*endpoint, "unix://")
	l, err := listen(sock)
	if err != nil {
		log.Fatalf("listen %s: %v", sock, err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(logged))
	csi.RegisterIdentityServer(srv, d)
	if *mode == "controller" {
		csi.RegisterControllerServer(srv, d)
	} else {
		csi.RegisterNodeServer(srv, d)
	}
	failed := make(chan error, 4)
	go func() { failed <- srv.Serve(l) }()
	var reg *grpc.Server
	if *mode == "node" {
		regSock := filepath.Join(*regDir, driverName+"-reg.sock")
		rl, err := listen(regSock)
		if err != nil {
			log.Fatalf("listen %s: %v", regSock, err)
		}
		reg = grpc.NewServer()
		registerapi.RegisterRegistrationServer(reg, &registration{endpoint: *kubeletEndpoint, failed: failed})
		go func() { failed <- reg.Serve(rl) }()
	}
	log.Printf("%s %s (%s mode) serving on %s, storage %s", driverName, version, *mode, sock, *root)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sigs:
		log.Printf("%s: stopping", s)
	case err := <-failed:
		log.Printf("stopping: %v", err)
		defer os.Exit(1)
	}
	if reg != nil {
		reg.Stop()
	}
	srv.Stop()
}
