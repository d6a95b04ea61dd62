package inputs

import (
	"context"
	"testing"
)

// Chunks is how many chunks file id is stored in.
func Chunks(t *testing.T, s *Store, id string) int {
	t.Helper()
	info, err := s.obs.GetInfo(context.Background(), fileObject(id))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.Chunks)
}
