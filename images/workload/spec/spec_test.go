package spec

import (
	"reflect"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    Behaviour
		wantErr bool
	}{
		"main defaults":        {args: []string{"main"}, want: Behaviour{Mode: Main, Duration: 3 * time.Second}},
		"main flags":           {args: []string{"main", "--seconds", "0.5", "--exit-code=7"}, want: Behaviour{Mode: Main, Duration: 500 * time.Millisecond, ExitCode: 7}},
		"program name skipped": {args: []string{"/workload", "main", "--seconds", "1"}, want: Behaviour{Mode: Main, Duration: time.Second}},
		"sidecar default":      {args: []string{"sidecar"}, want: Behaviour{Mode: Sidecar}},
		"sidecar exit code":    {args: []string{"sidecar", "--on-sigterm", "exit:1"}, want: Behaviour{Mode: Sidecar, SIGTERMExitCode: 1}},
		"sidecar ignore":       {args: []string{"sidecar", "--on-sigterm=ignore"}, want: Behaviour{Mode: Sidecar, IgnoreSIGTERM: true}},
		"run-counted exit codes": {args: []string{"main", "--exit-codes", "42,0", "--count-file", "/runs/main"},
			want: Behaviour{Mode: Main, Duration: 3 * time.Second, ExitCodes: []int{42, 0}, CountFile: "/runs/main"}},
		"exit codes without a count file": {args: []string{"main", "--exit-codes", "42,0"}, wantErr: true},
		"no mode":                         {args: nil, wantErr: true},
		"bad mode":                        {args: []string{"idle"}, wantErr: true},
		"flag of the other mode":          {args: []string{"sidecar", "--seconds", "1"}, wantErr: true},
		"missing value":                   {args: []string{"main", "--seconds"}, wantErr: true},
		"exit code too big":               {args: []string{"main", "--exit-code", "256"}, wantErr: true},
		"bad on-sigterm":                  {args: []string{"sidecar", "--on-sigterm", "die"}, wantErr: true},
		"proxy":                           {args: []string{"sidecar", "--listen", "9000"}, want: Behaviour{Mode: Sidecar, ListenPort: 9000}},
		"shipper":                         {args: []string{"sidecar", "--on-sigterm", "deliver:9000"}, want: Behaviour{Mode: Sidecar, DeliverPort: 9000}},
		"bad port":                        {args: []string{"sidecar", "--listen", "0"}, wantErr: true},
		"bad deliver port":                {args: []string{"sidecar", "--on-sigterm", "deliver:x"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse(%q) error = %v, wantErr %v", tc.args, err, tc.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q) = %+v, want %+v", tc.args, got, tc.want)
			}
		})
	}
}

func TestArgsRoundTrip(t *testing.T) {
	for _, b := range []Behaviour{
		{Mode: Main, Duration: 2500 * time.Millisecond, ExitCode: 3},
		{Mode: Sidecar, SIGTERMExitCode: 1},
		{Mode: Sidecar, IgnoreSIGTERM: true},
		{Mode: Sidecar, ListenPort: 9000},
		{Mode: Sidecar, DeliverPort: 9000, ListenPort: 9001},
	} {
		got, err := Parse(b.Args())
		if err != nil || !reflect.DeepEqual(got, b) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", b.Args(), got, err, b)
		}
	}
}
