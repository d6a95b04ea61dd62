package signature

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSignatureHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		lines []string
		want  []string
		err   error
	}{
		{"none", nil, nil, ErrMissingHeader},
		{"empty line", []string{""}, nil, ErrMissingHeader},
		{"spaces", []string{"  ", " "}, nil, ErrMissingHeader},
		{"one", []string{"v1,abc"}, []string{"abc"}, nil},
		{"versions", []string{"v1a,x v1,a v2,y v1 V1,z v1,b,c"}, []string{"a", "b,c"}, nil},
		{"empty signature", []string{"v1,"}, []string{""}, nil},
		{"two lines", []string{"v1,a", "v2,b v1,c"}, []string{"a", "c"}, nil},
		{"tabs are not separators", []string{"v1,a\tv1,b"}, []string{"a\tv1,b"}, nil},
		{"8 entries", []string{strings.Repeat("v2,x ", 7), "v1,a"}, []string{"a"}, nil},
		{"9 entries", []string{strings.Repeat("v2,x ", 8), "v1,a"}, nil, ErrBadSignatureHeader},
		{"4 KiB", []string{strings.Repeat("a", 2047), strings.Repeat("b", 2048)}, nil, nil},
		{"4 KiB + 1", []string{strings.Repeat("a", 2048), strings.Repeat("b", 2048)}, nil, ErrBadSignatureHeader},
	} {
		got, err := parseSignatureHeader(tc.lines, defaultMaxSignatures)
		if tc.err != nil {
			require.ErrorIs(t, err, tc.err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
}

// FuzzParseSignatureHeader: lines are the input split at '\n'. The parser
// never panics, never returns more than the cap, and every signature it
// returns is the rest of a "v1," entry of the input.
func FuzzParseSignatureHeader(f *testing.F) {
	for _, s := range []string{
		"", "v1,abc", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1a,xyz",
		"v1,a\nv1,b", "v1, v1 ,v1 v1,,", strings.Repeat("v1,a ", 9), "\t\n \n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		lines := strings.Split(in, "\n")
		sigs, err := parseSignatureHeader(lines, defaultMaxSignatures)
		if err != nil {
			require.Nil(t, sigs)
			require.True(t, errors.Is(err, ErrMissingHeader) || errors.Is(err, ErrBadSignatureHeader), err)
			return
		}
		require.LessOrEqual(t, len(in), maxSignatureHeaderLen)
		require.LessOrEqual(t, len(sigs), defaultMaxSignatures)
		entries := map[string]bool{}
		for _, l := range lines {
			for _, e := range strings.Split(l, " ") {
				entries[e] = true
			}
		}
		for _, s := range sigs {
			require.NotContains(t, s, " ")
			require.True(t, entries["v1,"+s], "%q is not the rest of a v1 entry", s)
		}
	})
}
