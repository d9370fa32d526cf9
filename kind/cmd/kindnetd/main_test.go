package main

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, cidr string, addrs ...corev1.NodeAddress) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

func TestPlanServesItsOwnCIDRAndRoutesTheOthers(t *testing.T) {
	nodes := []corev1.Node{
		node("cp", "10.244.0.0/24", internal("fc00::2"), internal("172.18.0.2")),
		node("w1", "10.244.1.0/24", internal("172.18.0.3")),
		node("w2", "10.244.2.0/24", internal("172.18.0.4")),
		node("new", "", internal("172.18.0.5")),                                                   // no CIDR yet
		node("odd", "10.244.9.0/24", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "x"}), // no address
	}
	got := plan(nodes, "172.18.0.3")
	want := []step{
		{cidr: "10.244.0.0/24", via: "172.18.0.2"},
		{self: true, cidr: "10.244.1.0/24", via: "172.18.0.3"},
		{cidr: "10.244.2.0/24", via: "172.18.0.4"},
	}
	if len(got) != len(want) {
		t.Fatalf("plan = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestConfIsPtpOverThePodCIDRWithPortmap(t *testing.T) {
	b, err := conf("10.244.1.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Name    string
		Plugins []struct {
			Type string
			IPAM struct {
				Type   string
				Ranges [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Plugins) != 2 || c.Plugins[0].Type != "ptp" || c.Plugins[1].Type != "portmap" {
		t.Fatalf("plugins %+v", c.Plugins)
	}
	if r := c.Plugins[0].IPAM.Ranges; c.Plugins[0].IPAM.Type != "host-local" || len(r) != 1 || r[0][0].Subnet != "10.244.1.0/24" {
		t.Errorf("ipam %+v", c.Plugins[0].IPAM)
	}
}
