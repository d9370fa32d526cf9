package bench

import (
	"reflect"
	"testing"
)

func TestServerStagesAreEachStagesTimeAcrossTheBurst(t *testing.T) {
	before := parseHistograms(`# HELP apiserver_flowcontrol_request_wait_duration_seconds x
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="service-accounts",priority_level="workload-low",le="0.1"} 9
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 1
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 10
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="exempt",priority_level="exempt"} 0
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="exempt",priority_level="exempt"} 100
apiserver_request_filter_duration_seconds_sum{filter="authentication"} 0.5
apiserver_request_filter_duration_seconds_count{filter="authentication"} 1000
`)
	after := parseHistograms(`apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 5
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 60
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="false",flow_schema="service-accounts",priority_level="workload-low"} 2
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="false",flow_schema="service-accounts",priority_level="workload-low"} 10
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="exempt",priority_level="exempt"} 0
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="exempt",priority_level="exempt"} 100
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="global-default",priority_level="global-default"} 0.75
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="global-default",priority_level="global-default"} 3
apiserver_flowcontrol_request_execution_seconds_sum{flow_schema="service-accounts",priority_level="workload-low",type="regular"} 3
apiserver_flowcontrol_request_execution_seconds_count{flow_schema="service-accounts",priority_level="workload-low",type="regular"} 30
apiserver_flowcontrol_request_execution_seconds_sum{flow_schema="service-accounts",priority_level="workload-low",type="watch"} 1
apiserver_flowcontrol_request_execution_seconds_count{flow_schema="service-accounts",priority_level="workload-low",type="watch"} 10
apiserver_request_filter_duration_seconds_sum{filter="authentication"} 2.5
apiserver_request_filter_duration_seconds_count{filter="authentication"} 2000
apiserver_request_filter_duration_seconds_sum{filter="audit"} 0.2
apiserver_request_filter_duration_seconds_count{filter="audit"} 1000
apiserver_admission_controller_admission_duration_seconds_sum{name="PodSecurity",operation="UPDATE",rejected="false",type="validate"} 0.3
apiserver_admission_controller_admission_duration_seconds_count{name="PodSecurity",operation="UPDATE",rejected="false",type="validate"} 300
etcd_request_duration_seconds_sum{group="",operation="update",type="/registry/pods"} 6
etcd_request_duration_seconds_count{group="",operation="update",type="/registry/pods"} 300
`)
	got := stagesBetween(before, after)
	want := ServerStages{
		Queued:    []StageTime{{Name: "global-default", Requests: 3, MeanSeconds: 0.25}, {Name: "workload-low", Requests: 60, MeanSeconds: 0.1}},
		Executing: []StageTime{{Name: "workload-low", Requests: 40, MeanSeconds: 0.1}},
		Filters:   []StageTime{{Name: "audit", Requests: 1000, MeanSeconds: 0.0002}, {Name: "authentication", Requests: 1000, MeanSeconds: 0.002}},
		Admission: []StageTime{{Name: "PodSecurity", Requests: 300, MeanSeconds: 0.001}},
		Etcd:      []StageTime{{Name: "update", Requests: 300, MeanSeconds: 0.02}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("times %+v, want %+v", got, want)
	}
	if s := formatTimes(got.Queued, "queued"); s != "global-default 3 requests, mean 250.0 ms queued; workload-low 60 requests, mean 100.0 ms queued" {
		t.Errorf("formatted %q", s)
	}
}
