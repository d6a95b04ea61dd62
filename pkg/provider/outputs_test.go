package provider_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
)

func TestAppendOutputURLs(t *testing.T) {
	raw := `{"video":{"url":"https://cdn.example/v.mp4"},"frames":["http://cdn.example/1.png","not a url",3],"a":"ftp://x"}`
	require.Equal(t, []string{"https://cdn.example/a.mp4", "http://cdn.example/1.png", "https://cdn.example/v.mp4"},
		provider.AppendOutputURLs([]string{"https://cdn.example/a.mp4"}, []byte(raw)), "appended, object keys in sorted order")
	require.Nil(t, provider.AppendOutputURLs(nil, []byte(`{"broken`)))
	require.Nil(t, provider.AppendOutputURLs(nil, nil))

	many := make([]string, 2*provider.MaxOutputs)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("https://cdn.example/%d", i))
	}
	require.Len(t, provider.AppendOutputURLs(nil, []byte("["+strings.Join(many, ",")+"]")), provider.MaxOutputs)
}
