package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// Metric reads one series of the controller's /metrics, e.g.
// `sidecar_terminator_actions_total{method="ImageSwap",result="success"}`;
// 0 when the series is absent.
func (ctl *Controller) Metric(ctx context.Context, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ctl.MetricsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, series+" ") {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, series)), 64)
		}
	}
	return 0, nil
}

// auditEntry is the part of an audit.k8s.io/v1 Event read here.
type auditEntry struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef struct {
		Resource, Subresource, Namespace, Name string
	} `json:"objectRef"`
	ResponseStatus struct{ Code int } `json:"responseStatus"`
}

// ControllerServiceAccountUser is the controller's identity in audit logs.
const ControllerServiceAccountUser = "system:serviceaccount:" + ControllerNamespace + ":" + ControllerName

// MutatingRequests reads an audit log (Options.AuditLogPath) and lists the
// completed mutating requests of one user, leaving out events and leases
// (bookkeeping, not work), as "verb resource[/subresource] name code".
func MutatingRequests(auditLog, user string) ([]string, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var a auditEntry
		if json.Unmarshal(sc.Bytes(), &a) != nil || a.Stage != "ResponseComplete" || a.User.Username != user {
			continue
		}
		switch a.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			continue
		}
		if a.ObjectRef.Resource == "events" || a.ObjectRef.Resource == "leases" {
			continue
		}
		res := a.ObjectRef.Resource
		if a.ObjectRef.Subresource != "" {
			res += "/" + a.ObjectRef.Subresource
		}
		out = append(out, a.Verb+" "+res+" "+a.ObjectRef.Name+" "+strconv.Itoa(a.ResponseStatus.Code))
	}
	return out, sc.Err()
}
