package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

func TestKruiseSettings(t *testing.T) {
	if got := (Config{KruiseQPS: 1000}).kruiseSettings(); got != nil {
		t.Errorf("without -kruise: %v, want none", got)
	}
	shippedOnly := Config{Kruise: true}.kruiseSettings()
	if len(shippedOnly) != 1 || !shippedOnly[0].Shipped() {
		t.Fatalf("-kruise-qps=0: %v, want the shipped setting alone", shippedOnly)
	}
	both := Config{Kruise: true, KruiseQPS: 1000, KruiseBurst: 500}.kruiseSettings()
	if len(both) != 2 || !both[0].Shipped() || both[1].Shipped() {
		t.Fatalf("settings %v, want shipped then raised", both)
	}
	if both[1].QPS != 1000 || both[1].Burst != 1000 {
		t.Errorf("raised setting %+v: a burst below the QPS must be raised to it", both[1])
	}
	// As shipped, the flags are left out: kruise-manager runs on its own
	// defaults, whatever they are.
	o := both[0].options()
	if !o.SidecarTerminator || o.QPS != 0 || o.Burst != 0 || o.User != KruiseUser {
		t.Errorf("shipped options %+v", o)
	}
	o = both[1].options()
	if !o.SidecarTerminator || o.QPS != 1000 || o.Burst != 1000 || o.User != KruiseUser {
		t.Errorf("raised options %+v", o)
	}
	if !strings.Contains(both[0].Name(), "as shipped (QPS 30)") || !strings.Contains(both[1].Name(), "QPS 1000") {
		t.Errorf("names %q, %q", both[0].Name(), both[1].Name())
	}
}

func TestKruiseManagerArgs(t *testing.T) {
	shipped := cluster.KruiseManagerArgs(cluster.KruiseManagerOptions{SidecarTerminator: true}, 1001, 1002, "/p")
	for _, a := range shipped {
		if strings.HasPrefix(a, "--rest-config-") {
			t.Errorf("shipped args carry %s", a)
		}
	}
	for _, want := range []string{"--feature-gates=SidecarTerminator=true", "--metrics-addr=127.0.0.1:1001", "--health-probe-addr=127.0.0.1:1002",
		"--enable-pprof=false", "--enable-leader-election=false"} {
		if !slices.Contains(shipped, want) {
			t.Errorf("args %v lack %s", shipped, want)
		}
	}
	raised := cluster.KruiseManagerArgs(cluster.KruiseManagerOptions{QPS: 1000, Burst: 2000}, 1, 2, "/p")
	for _, want := range []string{"--rest-config-qps=1000", "--rest-config-burst=2000", "--feature-gates=SidecarTerminator=false"} {
		if !slices.Contains(raised, want) {
			t.Errorf("args %v lack %s", raised, want)
		}
	}
}

// TestBenchPodsMeetKruisePredicates checks the bench's pods, once their
// main has exited, against what kruise's SidecarTerminator v1.9.1 needs
// (kruise.go), with OpenKruise's own mark names.
func TestBenchPodsMeetKruisePredicates(t *testing.T) {
	for i, virtual := range []bool{false, true} {
		p := jobPod("r", i, virtual)
		if p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Spec.NodeName == "" {
			t.Errorf("pod %d: restartPolicy %s, node %q", i, p.Spec.RestartPolicy, p.Spec.NodeName)
		}
		want := kruisev1alpha1.KruiseTerminateSidecarEnv
		if virtual {
			want = kruisev1alpha1.KruiseTerminateSidecarWithImageEnv
			if !strings.HasPrefix(p.Spec.NodeName, VirtualNodePrefix) {
				t.Errorf("virtual pod on %s", p.Spec.NodeName)
			}
		}
		env := p.Spec.Containers[1].Env
		if len(env) != 1 || env[0].Name != want || env[0].Value == "" || (!virtual && !strings.EqualFold(env[0].Value, "true")) {
			t.Errorf("pod %d sidecar env %v, want %s", i, env, want)
		}
	}
	// The virtual nodes carry kruise's virtual-kubelet label
	// (pkg/util/virtual_kubelet.go: type=virtual-kubelet); the normal one none.
	for name, labels := range benchNodes() {
		virtual := labels["type"] == "virtual-kubelet"
		if virtual != strings.HasPrefix(name, VirtualNodePrefix) {
			t.Errorf("node %s labels %v", name, labels)
		}
	}
}

func TestRotation(t *testing.T) {
	if got := rotation(2, 0); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("round 1 of 2: %v", got)
	}
	if got := rotation(2, 1); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("round 2 of 2: %v", got)
	}
	firsts := map[int]bool{}
	for r := 0; r < 4; r++ {
		got := rotation(4, r)
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if !slices.Equal(sorted, []int{0, 1, 2, 3}) {
			t.Errorf("round %d: %v is not every burst once", r+1, got)
		}
		firsts[got[0]] = true
	}
	if len(firsts) != 4 {
		t.Errorf("over 4 rounds of 4 bursts, %d distinct first bursts, want 4", len(firsts))
	}
}

// TestKruiseWritesFromAuditLog: kruise-manager's writes are told apart by
// its identity, events and leases aside, and a burst's are what a second
// read of the log holds beyond the first.
func TestKruiseWritesFromAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	line := func(user, verb, resource, sub, name string, code int) string {
		return `{"stage":"ResponseComplete","verb":"` + verb + `","user":{"username":"` + user + `"},"objectRef":{"resource":"` + resource +
			`","subresource":"` + sub + `","namespace":"default","name":"` + name + `"},"responseStatus":{"code":` + strconv.Itoa(code) + `}}`
	}
	probe := []string{line(KruiseUser, "create", "containerrecreaterequests", "", "sidecar-termination-probe", 201)}
	burst := []string{
		line(KruiseUser, "create", "containerrecreaterequests", "", "sidecar-termination-a", 201),
		line(KruiseUser, "update", "pods", "", "b", 200),
		line(KruiseUser, "create", "events", "", "a.1", 201),
		line(KruiseUser, "update", "leases", "", "x", 200),
		line("admin", "update", "pods", "status", "a", 200),
		`{"stage":"RequestReceived","verb":"create","user":{"username":"` + KruiseUser + `"},"objectRef":{"resource":"pods"}}`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(probe, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := cluster.MutatingRequests(path, KruiseUser)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(append(probe, burst...), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := cluster.MutatingRequests(path, KruiseUser)
	if err != nil {
		t.Fatal(err)
	}
	got := newWrites(before, after)
	want := []string{"create containerrecreaterequests sidecar-termination-a 201", "update pods b 200"}
	if !slices.Equal(got, want) {
		t.Errorf("burst writes %q, want %q", got, want)
	}
	k := kinds(got)
	slices.Sort(k)
	if !slices.Equal(k, []string{"create containerrecreaterequests 201 ×1", "update pods 200 ×1"}) {
		t.Errorf("kinds %q", k)
	}
	if newWrites(after, before) != nil {
		t.Error("a shorter second read must give no writes")
	}
}

func TestKruisePatience(t *testing.T) {
	base := kruisePatience(5000, 0)
	if base != time.Minute+50*time.Second {
		t.Errorf("no QPS: %s", base)
	}
	// At 30 QPS, 5,000 writes take 167 s: the wait must cover twice that.
	if got := kruisePatience(5000, 30); got < base+5*time.Minute {
		t.Errorf("5,000 pods at 30 QPS: wait %s", got)
	}
	if kruisePatience(5000, 1000) >= kruisePatience(5000, 30) {
		t.Error("a raised QPS must not wait longer")
	}
}

func TestKruiseCRRName(t *testing.T) {
	if got := KruiseCRRName("1234-abcd"); got != "sidecar-termination-1234-abcd" {
		t.Errorf("got %s", got)
	}
}

// The scale tier runs OpenKruise at its raised limits only; without a
// raised QPS there is nothing else to run, so the shipped column stays.
func TestKruiseRaisedOnly(t *testing.T) {
	raised := Config{Kruise: true, KruiseQPS: 1000, KruiseBurst: 2000, KruiseRaisedOnly: true}.kruiseSettings()
	if len(raised) != 1 || raised[0].QPS != 1000 || raised[0].Shipped() {
		t.Errorf("raised only: %+v, want QPS 1000 alone", raised)
	}
	if got := (Config{Kruise: true, KruiseRaisedOnly: true}).kruiseSettings(); len(got) != 1 || !got[0].Shipped() {
		t.Errorf("raised only without a raised QPS: %+v, want the shipped column", got)
	}
}
