package logkey_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// literal is a zerolog field written with a literal key.
var literal = regexp.MustCompile(`\.(Str|Strs|Stringer|Int|Int32|Int64|Ints|Uint|Uint32|Uint64|Uints|Float32|Float64|Bool|Dur|Durs|Time|Times|TimeDiff|Interface|Any|RawJSON|Bytes|Hex|IPAddr|AnErr|Dict|Array|Object|Errs)\("[a-z_0-9]+"`)

// Shipped code writes log keys through this package's constants, never
// as literals, so a key is spelled one way everywhere.
func TestNoLiteralLogKeys(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if literal.MatchString(line) {
				found = append(found, path+":"+strings.TrimSpace(line)+" (line "+strconv.Itoa(i+1)+")")
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found, "log keys written as literals: use package logkey's constants")
}
