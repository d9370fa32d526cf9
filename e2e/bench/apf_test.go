package bench

import (
	"reflect"
	"testing"
)

func TestAPFWaitsAreEachPriorityLevelsQueueTimeAcrossTheBurst(t *testing.T) {
	before := parseAPFWaits(`# HELP apiserver_flowcontrol_request_wait_duration_seconds x
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="service-accounts",priority_level="workload-low",le="0.1"} 9
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 1
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 10
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="exempt",priority_level="exempt"} 0
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="exempt",priority_level="exempt"} 100
`)
	after := parseAPFWaits(`apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 5
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 60
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="false",flow_schema="service-accounts",priority_level="workload-low"} 2
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="false",flow_schema="service-accounts",priority_level="workload-low"} 10
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="exempt",priority_level="exempt"} 0
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="exempt",priority_level="exempt"} 100
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="global-default",priority_level="global-default"} 0.75
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="global-default",priority_level="global-default"} 3
`)
	got := apfWaits(before, after)
	want := []APFWait{{Level: "global-default", Requests: 3, MeanWaitSeconds: 0.25}, {Level: "workload-low", Requests: 60, MeanWaitSeconds: 0.1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("waits %+v, want %+v", got, want)
	}
	if s := formatAPFWaits(got); s != "global-default 3 requests, mean 250.0 ms queued; workload-low 60 requests, mean 100.0 ms queued" {
		t.Errorf("formatted %q", s)
	}
}
