package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var rwo = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

func newDriver(t *testing.T, node string, root string) *driver {
	t.Helper()
	for _, sub := range []string{"volumes", "attach"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &driver{root: root, nodeID: node}
}

func code(err error) codes.Code { return status.Code(err) }

// A volume is attached to one node at a time: a second node is refused until the first
// detaches, and only the node it is attached to may stage it; its data stays in place.
func TestAVolumeIsAttachedToOneNodeAtATime(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	ctl := newDriver(t, "", root)
	n1, n2 := newDriver(t, "n1", root), newDriver(t, "n2", root)
	if _, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo}}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "volumes", "pvc-1", "token"), []byte("abc"), 0o644)
	pub := func(node string) error {
		_, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "pvc-1", NodeId: node, VolumeCapability: rwo})
		return err
	}
	if err := pub("n1"); err != nil {
		t.Fatal(err)
	}
	if err := pub("n1"); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := pub("n2"); code(err) != codes.FailedPrecondition {
		t.Fatalf("second node: %v, want FailedPrecondition", err)
	}
	stage := func(d *driver) error {
		_, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: filepath.Join(t.TempDir(), "g"), VolumeCapability: rwo})
		return err
	}
	if err := stage(n2); code(err) != codes.FailedPrecondition {
		t.Fatalf("staging on a node it is not attached to: %v, want FailedPrecondition", err)
	}
	// Detaching from another node changes nothing; from its node, it detaches.
	ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "pvc-1", NodeId: "n2"})
	if err := pub("n2"); code(err) != codes.FailedPrecondition {
		t.Fatalf("after a detach from the wrong node: %v", err)
	}
	if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "pvc-1", NodeId: "n1"}); err != nil {
		t.Fatal(err)
	}
	if err := pub("n2"); err != nil {
		t.Fatal(err)
	}
	if err := stage(n1); code(err) != codes.FailedPrecondition {
		t.Fatalf("the old node stages a volume moved away: %v", err)
	}
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); code(err) != codes.FailedPrecondition {
		t.Fatalf("deleting an attached volume: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "volumes", "pvc-1", "token"))
	if string(b) != "abc" {
		t.Fatalf("data: %q", b)
	}
	ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "pvc-1", NodeId: "n2"})
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "volumes", "pvc-1")); !os.IsNotExist(err) {
		t.Fatalf("volume left: %v", err)
	}
}

func TestBadInputIsRefused(t *testing.T) {
	ctx := context.Background()
	ctl := newDriver(t, "", t.TempDir())
	if _, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "../x"}); code(err) != codes.InvalidArgument {
		t.Fatalf("path in a name: %v", err)
	}
	rwx := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
	if _, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwx}}); code(err) != codes.InvalidArgument {
		t.Fatalf("ReadWriteMany: %v", err)
	}
	if _, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "nope", NodeId: "n1", VolumeCapability: rwo}); code(err) != codes.NotFound {
		t.Fatalf("unknown volume: %v", err)
	}
}

// With --sshfs the node plugin mounts each volume over the network: the source is the
// volume's own directory on the server, the host key is checked against the known_hosts it
// was given, login is by key only, and the keep-alive fails a cut mount's I/O.
func TestSSHFSMountsTheVolumeFromTheServerWithTheHostKeyChecked(t *testing.T) {
	d := &driver{sshfs: "root@172.18.0.9:/srv/powercut-csi/volumes", sshDir: "/etc/pcsi-ssh"}
	args := d.sshfsArgs("pvc-1", "/stage/g")
	if args[0] != "root@172.18.0.9:/srv/powercut-csi/volumes/pvc-1" || args[1] != "/stage/g" {
		t.Fatalf("source and target: %v", args[:2])
	}
	opts := map[string]bool{}
	for i := 2; i+1 < len(args); i += 2 {
		if args[i] != "-o" {
			t.Fatalf("expected -o pairs, got %v", args[2:])
		}
		opts[args[i+1]] = true
	}
	for _, want := range []string{
		"StrictHostKeyChecking=yes", "UserKnownHostsFile=/etc/pcsi-ssh/known_hosts",
		"IdentityFile=/etc/pcsi-ssh/id_ed25519", "BatchMode=yes", "ServerAliveInterval=5",
		"ServerAliveCountMax=3",
	} {
		if !opts[want] {
			t.Errorf("missing -o %s in %v", want, args)
		}
	}
}
