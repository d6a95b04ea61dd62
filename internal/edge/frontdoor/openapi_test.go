package frontdoor_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// schemaKeywords are the keywords an OpenAPI 3.1 schema object may have:
// JSON Schema draft 2020-12's and OpenAPI's own (x- extensions aside).
var schemaKeywords = strings.Fields(`
	$schema $id $ref $anchor $dynamicRef $dynamicAnchor $defs $comment $vocabulary
	allOf anyOf oneOf not if then else dependentSchemas prefixItems items contains
	properties patternProperties additionalProperties propertyNames unevaluatedItems unevaluatedProperties
	type enum const multipleOf maximum exclusiveMaximum minimum exclusiveMinimum
	maxLength minLength pattern maxItems minItems uniqueItems maxContains minContains
	maxProperties minProperties required dependentRequired
	format contentEncoding contentMediaType contentSchema
	title description default deprecated readOnly writeOnly examples
	discriminator xml externalDocs example`)

// TestOpenAPIDocumentIsWellFormed parses api/openapi.yaml as YAML and
// checks its structure where a YAML slip (an unquoted ": " or "," in a
// flow mapping) would silently change it: every schema's keys are schema
// keywords, its properties are schemas, every description is a string,
// and every $ref resolves.
func TestOpenAPIDocumentIsWellFormed(t *testing.T) {
	t.Parallel()
	const path = "../../../api/openapi.yaml"
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(b, &doc))
	c := &openapiCheck{doc: doc, dir: filepath.Dir(path)}
	c.walk("", doc)
	components, _ := doc["components"].(map[string]any)
	schemas, _ := components["schemas"].(map[string]any)
	require.NotEmpty(t, schemas)
	for name, s := range schemas {
		c.schema("components.schemas."+name, s)
	}
	require.Positive(t, c.schemas, "schemas were checked")
	require.Empty(t, c.problems, "api/openapi.yaml:\n%s", strings.Join(c.problems, "\n"))
}

type openapiCheck struct {
	doc      map[string]any
	dir      string
	schemas  int
	problems []string
}

func (c *openapiCheck) fail(at, format string, args ...any) {
	c.problems = append(c.problems, at+": "+fmt.Sprintf(format, args...))
}

// walk checks the document outside the schemas: descriptions and
// summaries are strings, $refs resolve, and what a "schema" key holds is a
// schema.
func (c *openapiCheck) walk(at string, v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			here := at + "." + k
			switch k {
			case "description", "summary", "title":
				if _, ok := e.(string); !ok {
					c.fail(here, "is %T, not a string", e)
				}
			case "$ref":
				c.ref(here, e)
			case "schema":
				c.schema(here, e)
				continue
			case "schemas":
				if at == ".components" {
					continue // checked one by one
				}
			case "example", "examples":
				continue // values, not document structure
			}
			c.walk(here, e)
		}
	case []any:
		for i, e := range v {
			c.walk(fmt.Sprintf("%s[%d]", at, i), e)
		}
	}
}

// schema checks a schema object and the schemas within it.
func (c *openapiCheck) schema(at string, v any) {
	s, ok := v.(map[string]any)
	if !ok {
		if _, isBool := v.(bool); !isBool {
			c.fail(at, "is %T, not a schema", v)
		}
		return
	}
	c.schemas++
	for k, e := range s {
		here := at + "." + k
		switch {
		case strings.HasPrefix(k, "x-"):
		case !slices.Contains(schemaKeywords, k):
			c.fail(here, "%q is not a schema keyword (an unquoted \": \" or \",\" in a flow mapping?)", k)
		case k == "$ref":
			c.ref(here, e)
		case k == "description" || k == "title" || k == "pattern" || k == "format" || k == "$comment":
			if _, ok := e.(string); !ok {
				c.fail(here, "is %T, not a string", e)
			}
		case k == "properties" || k == "patternProperties" || k == "$defs" || k == "dependentSchemas":
			props, ok := e.(map[string]any)
			if !ok {
				c.fail(here, "is %T, not a map of schemas", e)
				continue
			}
			for name, p := range props {
				c.schema(here+"."+name, p)
			}
		case k == "allOf" || k == "anyOf" || k == "oneOf" || k == "prefixItems":
			list, ok := e.([]any)
			if !ok {
				c.fail(here, "is %T, not a list of schemas", e)
				continue
			}
			for i, p := range list {
				c.schema(fmt.Sprintf("%s[%d]", here, i), p)
			}
		case k == "items" || k == "not" || k == "if" || k == "then" || k == "else" || k == "additionalProperties" ||
			k == "propertyNames" || k == "contains" || k == "unevaluatedItems" || k == "unevaluatedProperties" || k == "contentSchema":
			c.schema(here, e)
		case k == "required":
			list, ok := e.([]any)
			if !ok {
				c.fail(here, "is %T, not a list of names", e)
				continue
			}
			props, _ := s["properties"].(map[string]any)
			for _, name := range list {
				n, ok := name.(string)
				if !ok {
					c.fail(here, "%v is not a property name", name)
					continue
				}
				if _, defined := props[n]; props != nil && !defined {
					c.fail(here, "requires %q, which properties does not define", n)
				}
			}
		case k == "enum":
			if _, ok := e.([]any); !ok {
				c.fail(here, "is %T, not a list", e)
			}
		}
	}
}

// ref checks that a reference resolves: a JSON pointer into the document,
// or a file beside it (with an optional pointer into that file, not
// followed).
func (c *openapiCheck) ref(at string, v any) {
	ref, ok := v.(string)
	if !ok {
		c.fail(at, "is %T, not a string", v)
		return
	}
	file, pointer, _ := strings.Cut(ref, "#")
	if file != "" {
		if _, err := os.Stat(filepath.Join(c.dir, file)); err != nil {
			c.fail(at, "%s: %v", ref, err)
		}
		return
	}
	var node any = c.doc
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := node.(map[string]any)
		if !ok {
			c.fail(at, "%s does not resolve", ref)
			return
		}
		if node, ok = m[tok]; !ok {
			c.fail(at, "%s does not resolve", ref)
			return
		}
	}
}

// apiBase is where the contract documents' $ids place them (api/ of the
// repository): the schemas are schemas/<file> under it, openapi.yaml is
// beside them.
const apiBase = "https://raw.githubusercontent.com/pollux-dev/pollux/main/api/"

// TestOpenAPIExamplesAreValid validates every example of api/openapi.yaml
// against its schema with a JSON Schema validator that knows the schemas of
// api/schemas only by their $ids: the document's $refs to schemas/*.json,
// and theirs to each other, resolve through the $ids, and nothing is read
// from anywhere else.
func TestOpenAPIExamplesAreValid(t *testing.T) {
	t.Parallel()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refuseLoads{})
	files, err := filepath.Glob("../../../api/schemas/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		require.NoError(t, err, f)
		id, _ := doc.(map[string]any)["$id"].(string)
		require.Equal(t, apiBase+"schemas/"+filepath.Base(f), id, "%s: its $id", f)
		require.NoError(t, c.AddResource(id, doc))
	}
	b, err := os.ReadFile("../../../api/openapi.yaml")
	require.NoError(t, err)
	var raw any
	require.NoError(t, yaml.Unmarshal(b, &raw))
	js, err := json.Marshal(raw)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	require.NoError(t, err)
	const openapi = apiBase + "openapi.yaml"
	require.NoError(t, c.AddResource(openapi, doc))

	checked := 0
	for _, ex := range examples(doc, "") {
		s, err := c.Compile(openapi + "#" + ex.schema)
		require.NoError(t, err, ex.schema)
		require.NoError(t, s.Validate(ex.value), "the example at %s", ex.at)
		checked++
	}
	require.GreaterOrEqual(t, checked, 3, "the request, response and error examples were checked")
}

// refuseLoads loads nothing: every document is added by its $id.
type refuseLoads struct{}

func (refuseLoads) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is not a contract document's $id", url)
}

// example is an example of the document and the JSON pointer of the
// schema it must be valid against.
type example struct {
	at, schema string
	value      any
}

// examples finds the document's examples: a media type's or a
// parameter's "example" beside its "schema", and a schema's own
// "example" (OpenAPI's keyword).
func examples(v any, at string) []example {
	m, ok := v.(map[string]any)
	if !ok {
		if list, ok := v.([]any); ok {
			var out []example
			for i, e := range list {
				out = append(out, examples(e, fmt.Sprintf("%s/%d", at, i))...)
			}
			return out
		}
		return nil
	}
	var out []example
	if e, ok := m["example"]; ok {
		switch _, beside := m["schema"]; {
		case beside:
			out = append(out, example{at: at + "/example", schema: at + "/schema", value: e})
		case strings.Contains(at, "/schemas/") || strings.HasSuffix(at, "/schema"):
			out = append(out, example{at: at + "/example", schema: at, value: e})
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "example" || k == "examples" {
			continue
		}
		out = append(out, examples(m[k], at+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k))...)
	}
	return out
}
