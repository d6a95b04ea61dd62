package generic_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider/generic"
)

func doc(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

func TestPathEval(t *testing.T) {
	t.Parallel()
	d := doc(t, `{
		"id": "t1",
		"data": {"task_result": {"videos": [{"url": "u1", "id": 1}, {"url": "u2"}, {"id": 3}]}},
		"list": [[1, 2], [3]],
		"n": 42, "f": false, "z": null,
		"weird key!": {"x": "y"},
		"empty": []
	}`)
	tests := []struct {
		path string
		want []any
	}{
		{"id", []any{"t1"}},
		{"n", []any{json.Number("42")}},
		{"f", []any{false}},
		{"z", []any{nil}},
		{"data.task_result.videos[0].url", []any{"u1"}},
		{"data.task_result.videos[1].url", []any{"u2"}},
		{"data.task_result.videos[*].url", []any{"u1", "u2"}},
		{"data.task_result.videos[*].id", []any{json.Number("1"), json.Number("3")}},
		{"data.task_result.videos[3].url", nil},
		{"list[*][*]", []any{json.Number("1"), json.Number("2"), json.Number("3")}},
		{"list[1][0]", []any{json.Number("3")}},
		{"weird key!.x", []any{"y"}},
		{"missing", nil},
		{"id.deeper", nil},
		{"id[0]", nil},
		{"data[0]", nil},
		{"empty[*]", nil},
		{"n.x", nil},
	}
	for _, tt := range tests {
		p, err := generic.ParsePath(tt.path)
		require.NoError(t, err, tt.path)
		require.Equal(t, tt.path, p.String())
		require.Equal(t, tt.want, p.Eval(d), tt.path)
	}
	top, err := generic.ParsePath("[1].a")
	require.NoError(t, err)
	require.Equal(t, []any{"b"}, top.Eval(doc(t, `[{"a":"x"},{"a":"b"}]`)))
	v, ok := top.First(doc(t, `[]`))
	require.False(t, ok)
	require.Nil(t, v)
}

func TestParsePathRefusesMalformedPaths(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"", ".", "a.", ".a", "a..b", "a[", "a[]", "a[x]", "a[-1]", "a[01]", "a[1234567890]",
		"a]", "a[0]b", "a.[0]", "a[*", "a]b", "[", "[0", "a[0]]",
	} {
		_, err := generic.ParsePath(p)
		require.Error(t, err, "%q", p)
	}
	long := "a"
	for range 40 {
		long += ".a"
	}
	_, err := generic.ParsePath(long)
	require.ErrorContains(t, err, "steps")
}

func FuzzPath(f *testing.F) {
	f.Add("data.task_result.videos[*].url", `{"data":{"task_result":{"videos":[{"url":"u"}]}}}`)
	f.Add("[0][*].a", `[[{"a":1}]]`)
	f.Add("a.b", `{"a":{"b":null}}`)
	f.Fuzz(func(t *testing.T, path, body string) {
		p, err := generic.ParsePath(path)
		if err != nil {
			return
		}
		require.Equal(t, path, p.String())
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.UseNumber()
		var d any
		if dec.Decode(&d) != nil {
			return
		}
		_ = p.Eval(d) // never panics
	})
}
