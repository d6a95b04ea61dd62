package events_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The contract documents pass the ecosystem's own validators, pinned in
// api/package.json (make test installs them with npm ci): Redocly lints
// openapi.yaml with its strict rules (api/redocly.yaml), and
// api/validate.mjs validates asyncapi.yaml with the AsyncAPI parser and
// every JSON Schema with Ajv — each compiles, its cross-file $refs resolve
// through the $ids, and each of its examples is valid.
func TestContractPassesTheEcosystemsValidators(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node not found: install Node.js 20 or later (Debian: apt-get install nodejs npm)")
	}
	dir, err := filepath.Abs(apiDir)
	if err != nil {
		t.Fatal(err)
	}
	redocly := filepath.Join(dir, "node_modules", ".bin", "redocly")
	if _, err := os.Stat(redocly); err != nil {
		t.Fatal("api/node_modules is missing: run `make tools` (make test does), or `npm ci` in api/")
	}
	for _, c := range []*exec.Cmd{
		exec.Command(redocly, "lint", "--format=stylish", "openapi.yaml"),
		exec.Command(node, "validate.mjs"),
	} {
		c.Dir = dir
		c.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", c.Args, err, out)
		}
	}
}
