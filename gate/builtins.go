package gate

import (
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// pureBuiltins are the only builtins a policy may call: functions of their
// arguments (and of the evaluation time, which the engine's clock sets), with
// no file, network, environment or randomness. It is an allowlist, so a
// builtin that a newer OPA adds stays out until someone reads it and adds it
// here (TestBuiltinsAllClassified fails until then).
var pureBuiltins = map[string]bool{}

func init() {
	for _, n := range []string{
		"abs", "all", "and", "any", "array.concat", "array.flatten", "array.reverse", "array.slice",
		"assign", "base64.decode", "base64.encode", "base64.is_valid", "base64url.decode",
		"base64url.encode", "base64url.encode_no_pad", "bits.and", "bits.lsh", "bits.negate", "bits.or",
		"bits.rsh", "bits.xor", "cast_array", "cast_boolean", "cast_null", "cast_object", "cast_set",
		"cast_string", "ceil", "concat", "contains", "count", "crypto.hmac.equal", "crypto.hmac.md5",
		"crypto.hmac.sha1", "crypto.hmac.sha256", "crypto.hmac.sha512", "crypto.md5", "crypto.sha1",
		"crypto.sha256", "div", "endswith", "eq", "equal", "floor", "format_int", "glob.match",
		"glob.quote_meta", "graph.reachable", "graph.reachable_paths", "gt", "gte", "hex.decode",
		"hex.encode", "indexof", "indexof_n", "internal.member_2", "internal.member_3", "internal.print",
		"internal.template_string", "internal.test_case", "intersection", "is_array", "is_boolean",
		"is_null", "is_number", "is_object", "is_set", "is_string", "json.filter", "json.is_valid",
		"json.marshal", "json.marshal_with_options", "json.patch", "json.remove", "json.unmarshal",
		"lower", "lt", "lte", "max", "min", "minus", "mul", "neq", "numbers.range", "numbers.range_step",
		"object.filter", "object.get", "object.keys", "object.remove", "object.subset", "object.union",
		"object.union_n", "or", "plus", "print", "product", "re_match",
		"regex.find_all_string_submatch_n", "regex.find_n", "regex.globs_match", "regex.is_valid",
		"regex.match", "regex.replace", "regex.split", "regex.template_match", "rego.metadata.chain",
		"rego.metadata.rule", "rem", "replace", "round", "semver.compare", "semver.is_valid", "set_diff",
		"sort", "split", "sprintf", "startswith", "strings.any_prefix_match", "strings.any_suffix_match",
		"strings.count", "strings.render_template", "strings.replace_n", "strings.reverse",
		"strings.split_n", "substring", "sum", "time.add_date", "time.clock", "time.date", "time.diff",
		"time.format", "time.now_ns", "time.parse_duration_ns", "time.parse_ns", "time.parse_rfc3339_ns",
		"time.weekday", "to_number", "trace", "trim", "trim_left", "trim_prefix", "trim_right",
		"trim_space", "trim_suffix", "type_name", "union", "units.parse", "units.parse_bytes", "upper",
		"uri.is_valid", "uri.parse", "urlquery.decode", "urlquery.decode_object", "urlquery.encode",
		"urlquery.encode_object", "uuid.parse", "walk", "yaml.is_valid", "yaml.marshal", "yaml.unmarshal",
	} {
		pureBuiltins[n] = true
	}
}

// impureBuiltins are this OPA's builtins that are left out, and why. Each
// has a test that a policy calling it does not compile.
var impureBuiltins = map[string]string{
	"http.send":                 "the network",
	"net.lookup_ip_addr":        "the network (DNS)",
	"opa.runtime":               "the environment and the OPA configuration",
	"json.match_schema":         "a $ref can open files (file://) and URLs",
	"json.verify_schema":        "a $ref can open files (file://) and URLs",
	"io.jwt.":                   "JWKS and certificate handling, signing with randomness",
	"crypto.x509.":              "certificate verification reads the system clock and roots",
	"crypto.parse_private_keys": "keys have no place in a policy",
	"graphql.":                  "heavy parsers that a gate policy does not need",
	"net.":                      "network-related; left out with the rest of net.*",
	"providers.aws.sign_req":    "credentials and the system clock",
	"rand.intn":                 "randomness: a decision must replay exactly",
	"uuid.rfc4122":              "randomness: a decision must replay exactly",
	"rego.parse_module":         "compiles Rego at evaluation time",
}

// impure reports whether name is left out, with the reason.
func impure(name string) (string, bool) {
	if r, ok := impureBuiltins[name]; ok {
		return r, true
	}
	for prefix, r := range impureBuiltins {
		if strings.HasSuffix(prefix, ".") && strings.HasPrefix(name, prefix) {
			return r, true
		}
	}
	return "", false
}

// capabilities are this OPA's builtins restricted to pureBuiltins, with no
// network hosts allowed.
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool { return !pureBuiltins[b.Name] })
	c.AllowNet = []string{}
	return c
}
