package simulate

import (
	"encoding/csv"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeTrace renders jobs as a trace.
func writeTrace(t *testing.T, jobs []Job) string {
	t.Helper()
	var b strings.Builder
	w := csv.NewWriter(&b)
	require.NoError(t, w.Write(traceColumns))
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, j := range jobs {
		require.NoError(t, w.Write([]string{j.Model, f(j.Submit), f(j.Queue), f(j.Duration), j.Outcome}))
	}
	w.Flush()
	require.NoError(t, w.Error())
	return b.String()
}

func TestReadTraceRoundTrip(t *testing.T) {
	t.Parallel()
	w, err := LookupWorkload("early-failures")
	require.NoError(t, err)
	jobs := w.Jobs(500, 3)
	got, err := ReadTrace(strings.NewReader(writeTrace(t, jobs)))
	require.NoError(t, err)
	require.Equal(t, jobs, got)
}

func TestReadTraceColumnsInAnyOrder(t *testing.T) {
	t.Parallel()
	got, err := ReadTrace(strings.NewReader("outcome, model,duration_s,queue_s,submit_s\nfailed,veo,12.5,2,0\nsucceeded, kling ,90,0,1.5\n"))
	require.NoError(t, err)
	require.Equal(t, []Job{
		{Model: "veo", Submit: 0, Queue: 2, Duration: 12.5, Outcome: "failed"},
		{Model: "kling", Submit: 1.5, Queue: 0, Duration: 90, Outcome: "succeeded"},
	}, got)
}

func TestReadTraceNamesTheFault(t *testing.T) {
	t.Parallel()
	const head = "model,submit_s,queue_s,duration_s,outcome\n"
	tests := []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"header only", head, "no jobs"},
		{"unknown column", "model,submit_s,queue_s,duration_s,result\n", `line 1: unknown column "result"`},
		{"repeated column", "model,submit_s,queue_s,duration_s,model\n", `line 1: column "model" appears twice`},
		{"short row", head + "a,1,2\n", "line 2"},
		{"not a number", head + "a,0,0,10,succeeded\na,1,x,10,succeeded\n", `line 3: queue_s: "x" is not a finite number`},
		{"infinite", head + "a,0,0,Inf,succeeded\n", `line 2: duration_s: "Inf" is not a finite number`},
		{"negative", head + "a,-1,0,10,succeeded\n", "line 2: submit_s: -1 is negative"},
		{"zero duration", head + "a,0,0,0,failed\n", "line 2: duration_s: must be > 0"},
		{"queued past the end", head + "a,0,11,10,failed\n", "line 2: queue_s: 11 is longer than duration_s 10"},
		{"unknown outcome", head + "a,0,0,10,done\n", `line 2: outcome: "done" is not one of succeeded, failed, canceled`},
		{"no model", head + ",0,0,10,failed\n", "line 2: model: empty"},
		{"out of order", head + "a,5,0,10,failed\na,4,0,10,failed\n", "line 3: submit_s: 4 is before the previous job's 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ReadTrace(strings.NewReader(tt.in))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func FuzzReadTrace(f *testing.F) {
	f.Add("model,submit_s,queue_s,duration_s,outcome\na,0,1,10,succeeded\n")
	f.Add("outcome,model,duration_s,queue_s,submit_s\nfailed,veo,12.5,2,0\n")
	f.Fuzz(func(t *testing.T, in string) {
		jobs, err := ReadTrace(strings.NewReader(in))
		if err != nil {
			return
		}
		for i, j := range jobs {
			if j.Model == "" || !(j.Duration > 0) || j.Queue < 0 || j.Queue > j.Duration || (i > 0 && j.Submit < jobs[i-1].Submit) {
				t.Fatalf("accepted an invalid job %+v", j)
			}
		}
	})
}
