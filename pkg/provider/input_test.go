package provider_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
)

func TestInputWithModel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		input, want string
		invalid     bool
	}{
		{"", `{"model":"m"}`, false},
		{`{"prompt":"p"}`, `{"model":"m","prompt":"p"}`, false},
		{`{"model":"m","prompt":"p"}`, `{"model":"m","prompt":"p"}`, false},
		{`{"model":"other"}`, "", true},
		{`[1]`, "", true},
		{`null`, "", true},
	} {
		fields, err := provider.InputWithModel(json.RawMessage(tt.input), "model", "m")
		if tt.invalid {
			require.Equal(t, provider.Invalid, provider.ClassOf(err), tt.input)
			continue
		}
		require.NoError(t, err, tt.input)
		b, err := json.Marshal(fields)
		require.NoError(t, err)
		require.JSONEq(t, tt.want, string(b))
	}
}
