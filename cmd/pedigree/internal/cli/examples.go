package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// examplesHelp says where the examples' variables come from.
const examplesHelp = `The examples in 'pedigree VERB --help' run in the shell of the README's Quick
start: $Q (a scratch directory), $KEYS (the private keys), and the entries $P
(Alice's prompt), $E (the email) and $M (the agent's memory of it).`

// examples is one example per runnable verb, shown by --help (cobra's
// Example field) and run, in this order, after the README's Quick start by
// TestReadmeQuickStart: a line whose comment says "exit N" must
// exit N, every other line 0. Each works when pasted into the Quick start's
// shell; the verbs that only work before freeze make a scratch directory.
// An example whose first line is "# needs: PATH" is run only when PATH
// (relative to the checkout) exists.
// A verb that sets its own Example keeps it.
var examples = []struct{ path, example string }{
	{"pedigree init", `
D=$(mktemp -d)                                   # a scratch directory
pedigree --dir "$D/data" init --tau 0.5`},
	{"pedigree registry add", `
D=$(mktemp -d); pedigree --dir "$D/data" init    # a scratch directory, before freeze
pedigree --dir "$D/data" registry add user:bob --tier user --new-key "$D/bob.key"`},
	{"pedigree registry freeze", `
D=$(mktemp -d); pedigree --dir "$D/data" init    # a scratch directory
pedigree --dir "$D/data" registry add user:bob --tier user --new-key "$D/bob.key"
pedigree --dir "$D/data" registry freeze         # exit 0; from now on no principal changes`},
	{"pedigree registry seal", `
D=$(mktemp -d); pedigree --dir "$D/data" init    # a scratch directory
pedigree --dir "$D/data" registry add user:bob --tier user --new-key "$D/bob.key"
pedigree --dir "$D/data" registry freeze         # seals the configuration too (none yet)
printf 'tools:\n  send_money: {role: send}\n' > "$D/data/tools.yaml"
pedigree --dir "$D/data" verify; echo "exit $?"  # exit 1: tools.yaml was added since the seal
pedigree --dir "$D/data" registry seal           # exit 0: the operator seals the change
pedigree --dir "$D/data" verify                  # exit 0`},
	{"pedigree registry list", `
pedigree registry list -o json`},
	{"pedigree record", `
pedigree record --as user:alice --key "$KEYS/alice.key" --session s1 --kind prompt --content "Also pay the rent"`},
	{"pedigree recall", `
pedigree recall --session s2 $M                  # the memory, and its taint, join session s2`},
	{"pedigree gate check", `
pedigree gate check --as agent:assistant --key "$KEYS/agent.key" --session s1 --tool send_money \
    --args '{"to":"123-456"}' --justification $P  # exit 0: allow`},
	{"pedigree gate approve", `
pedigree gate check --as agent:assistant --key "$KEYS/agent.key" --session s1 --tool send_money \
    --args '{"to":"999-666"}' --justification $M  # exit 3: deny
D=$(pedigree gate log --limit 1 | awk 'NR==1 {print $2}')   # that decision's ID
pedigree gate approve $D --as user:alice --key "$KEYS/alice.key"
pedigree gate check --as agent:assistant --key "$KEYS/agent.key" --session s1 --tool send_money \
    --args '{"to":"999-666"}' --justification $M  # exit 0: allowed once, by Alice`},
	{"pedigree gate pending", `
pedigree gate pending                            # denies and asks nobody has answered yet`},
	{"pedigree gate reject", `
pedigree gate check --as agent:assistant --key "$KEYS/agent.key" --session s1 --tool send_money \
    --args '{"to":"999-666","amount":5}' --justification $M  # exit 3: deny
D=$(pedigree gate log --limit 1 | awk 'NR==1 {print $2}')   # that decision's ID
pedigree gate reject $D --as user:alice --key "$KEYS/alice.key"   # it leaves 'gate pending' for good`},
	{"pedigree plan record", `
PL=$(pedigree plan record --as agent:assistant --key "$KEYS/agent.key" --session s1 --parent $P \
    --steps '[{"tool":"send_money","args":{"to":"123-456"}}]')   # made from Alice's prompt alone
pedigree gate check --as agent:assistant --key "$KEYS/agent.key" --session s1 --tool send_money \
    --args '{"to":"123-456"}' --plan $PL --step 0   # exit 0: the plan is the call's control`},
	{"pedigree gate log", `
pedigree gate log --limit 5 --session s1`},
	{"pedigree gate reevaluate", `
D=$(pedigree gate log --limit 1 | awk 'NR==1 {print $2}')   # the latest decision's ID
pedigree gate reevaluate $D                      # exit 0: the same input and policy, the same decision`},
	{"pedigree lineage trace", `
pedigree lineage trace $M -o dot > "$Q/trace.dot"   # for Graphviz: dot -Tsvg "$Q/trace.dot"`},
	{"pedigree lineage show", `
pedigree lineage show $M -o json`},
	{"pedigree verify", `
pedigree verify                                  # exit 0; 3 names what was tampered with`},
	{"pedigree log checkpoint", `
pedigree log checkpoint > "$Q/checkpoint.txt"    # keep it where this host cannot rewrite it`},
	{"pedigree log prove", `
pedigree log checkpoint
pedigree log prove $M`},
	{"pedigree log consistency", `
A=$(pedigree log checkpoint | awk 'NR==1 {print $2+0}')   # the size of a checkpoint
pedigree record --as user:alice --key "$KEYS/alice.key" --session s1 --content "one more"
B=$(pedigree log checkpoint | awk 'NR==1 {print $2+0}')
pedigree log consistency $A $B`},
	{"pedigree log head", `
pedigree log head                                # size 23: root 5c1e...: no key needed`},
	{"pedigree log refusals", `
pedigree log refusals --limit 20                 # forged signatures, unknown principals, bad approvals...`},
	{"pedigree mcp add", `
# needs: testdata/mcp/node_modules (cd testdata/mcp && npm ci: the reference MCP servers)
D=$(mktemp -d); pedigree --dir "$D/data" init    # a scratch directory, before freeze
pedigree --dir "$D/data" mcp add memory --env MEMORY_FILE_PATH="$D/memory.jsonl" -- \
    node testdata/mcp/node_modules/@modelcontextprotocol/server-memory/dist/index.js`},
	{"pedigree mcp list", `
pedigree mcp list -o json`},
	{"pedigree mcp update", `
# needs: testdata/mcp/node_modules (cd testdata/mcp && npm ci: the reference MCP servers)
D=$(mktemp -d); pedigree --dir "$D/data" init    # a scratch directory
pedigree --dir "$D/data" mcp add memory --env MEMORY_FILE_PATH="$D/memory.jsonl" -- \
    node testdata/mcp/node_modules/@modelcontextprotocol/server-memory/dist/index.js
pedigree --dir "$D/data" registry freeze
pedigree --dir "$D/data" mcp update memory       # exit 0: it offers what was sealed; after a change, 'registry seal'`},
	{"pedigree mcp run", `
# needs: testdata/mcp/node_modules (cd testdata/mcp && npm ci: the reference MCP servers)
D=$(mktemp -d); pedigree --dir "$D/data" init    # a scratch directory, before freeze
pedigree --dir "$D/data" mcp add memory --env MEMORY_FILE_PATH="$D/memory.jsonl" -- \
    node testdata/mcp/node_modules/@modelcontextprotocol/server-memory/dist/index.js
pedigree --dir "$D/data" registry freeze
pedigree --dir "$D/data" mcp run --listen 127.0.0.1:8931 2>"$D/mcp.log" &   # MCP over HTTP; the bearer token is in $D/data/mcp/token
kill %%                                          # stop it
# the one-line form: it sets up $D/one on its first run (what it did is in $D/one.log), then serves (stdin is empty here)
MEMORY_FILE_PATH="$D/m.jsonl" pedigree --dir "$D/one" mcp run -- \
    node testdata/mcp/node_modules/@modelcontextprotocol/server-memory/dist/index.js </dev/null 2>"$D/one.log"`},
	{"pedigree mcp import-memory", `
echo '{"type":"entity","name":"Alice","entityType":"person","observations":["pays bills to 123-456"]}' > "$Q/memory.jsonl"
pedigree mcp import-memory "$Q/memory.jsonl" --as user:alice --key "$KEYS/alice.key"`},
	{"pedigree serve", `
pedigree serve 2>"$Q/serve.log" &                # logs (JSON lines) to a file
pedigree registry list                           # answered through the server's socket
kill %%                                          # stop it (the latest background job): it drains, then closes the store`},
	{"pedigree ui", `
pedigree serve --ui 2>"$Q/ui.log" &              # the page for people, on a free loopback port
pedigree registry list >/dev/null                # waits until the server answers
pedigree ui --start=false                        # a one-time link to the page: open it in a browser
kill %%                                          # stop the server`},
	{"pedigree hook claude init", `
D=$(mktemp -d); pedigree --dir "$D/data" init    # a scratch directory, before freeze
pedigree --dir "$D/data" hook claude init        # the principals and catalog entries the hook signs for
pedigree --dir "$D/data" registry freeze`},
	{"pedigree hook claude", `
D=$(mktemp -d); pedigree --dir "$D/data" init; pedigree --dir "$D/data" hook claude init
pedigree --dir "$D/data" registry freeze
echo '{"session_id":"s1","hook_event_name":"UserPromptSubmit","prompt":"hi"}' | pedigree --dir "$D/data" hook claude`},
	{"pedigree claude install", `
D=$(mktemp -d)                                   # a scratch directory in place of ~/.claude
echo '{"permissions": {"allow": ["Bash(ls:*)"]}}' > "$D/settings.json"   # the user's own settings
pedigree --dir "$D/data" claude install --settings "$D/settings.json"     # set up, self-test, merge
pedigree --dir "$D/data" claude install --settings "$D/settings.json"     # again: nothing changes`},
	{"pedigree claude uninstall", `
D=$(mktemp -d); pedigree --dir "$D/data" claude install --settings "$D/settings.json" >/dev/null
pedigree claude uninstall --settings "$D/settings.json"                   # pedigree's hooks removed, the rest kept`},
	{"pedigree hook claude trust-workspace", `
D=$(mktemp -d); pedigree --dir "$D/data" init; pedigree --dir "$D/data" hook claude init
pedigree --dir "$D/data" registry freeze
git init -q "$D/repo" && echo hello > "$D/repo/README.md" && git -C "$D/repo" add README.md
git -C "$D/repo" -c user.name=me -c user.email=me@example.com commit -qm first
pedigree --dir "$D/data" hook claude trust-workspace "$D/repo" --tier internal   # sealed with the operator key
pedigree --dir "$D/data" hook claude trust-workspace --list`},
	{"pedigree hook claude settings", `
pedigree hook claude settings > "$Q/hooks.json"  # the block for .claude/settings.json`},
	{"pedigree replay", `
pedigree replay testdata/scenarios/*.jsonl --tools policies/catalogs/email.yaml,policies/catalogs/payments.yaml,policies/catalogs/files.yaml,policies/catalogs/shell.yaml,policies/catalogs/chat.yaml   # exit 0: every decision as expected`},
	{"pedigree trajectory show", `
pedigree trajectory show --session s1`},
	{"pedigree trajectory train", `
pedigree trajectory generate --sessions 400 --seed 1 > "$Q/train.jsonl"
pedigree trajectory train "$Q/train.jsonl" --model "$Q/model.json" --tools testdata/trajectory/tools.yaml`},
	{"pedigree trajectory eval", `
pedigree trajectory generate --sessions 400 --seed 2 > "$Q/test.jsonl"
pedigree trajectory eval "$Q/test.jsonl" --tools testdata/trajectory/tools.yaml   # the invariant rules alone`},
	{"pedigree trajectory generate", `
pedigree trajectory generate --sessions 10 --attack-share 0.5 --seed 3`},
	{"pedigree bench", `
pedigree bench --entries 1000 --checks 100 -o json`},
	{"pedigree demo", `
pedigree demo`},
	{"pedigree witness serve", `
pedigree witness serve --key "$Q/witness.key" --state "$Q/witness.json" >"$Q/witness.url" &   # keeps this directory's log
until [ -s "$Q/witness.url" ]; do sleep 0.1; done    # it prints its URL first
export PEDIGREE_WITNESS_URL=$(cat "$Q/witness.url") PEDIGREE_WITNESS_KEY="$Q/witness.pub"
pedigree record --as user:alice --key "$KEYS/alice.key" --session s3 --content "Pay the gas bill"
pedigree verify                                  # exit 0: the store extends what the witness holds
unset PEDIGREE_WITNESS_URL PEDIGREE_WITNESS_KEY; kill %%`},
}

// addExamples sets each verb's Example from examples, indented as cobra
// prints it, unless the verb has its own.
func addExamples(root *cobra.Command) {
	byPath := map[string]string{}
	for _, e := range examples {
		byPath[e.path] = e.example
	}
	walk(root, func(c *cobra.Command) {
		ex, ok := byPath[c.CommandPath()]
		if !ok || c.Example != "" {
			return
		}
		lines := strings.Split(strings.TrimPrefix(ex, "\n"), "\n")
		for i, l := range lines {
			lines[i] = "  " + l
		}
		c.Example = strings.Join(lines, "\n")
	})
}

func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

// Example is one verb's example, as --help shows it.
type Example struct {
	Path    string // "pedigree gate check"
	Example string
}

// Examples lists every runnable verb's example in the order they are meant
// to run after the README's Quick start (see examples); a verb without one
// has an empty Example.
func Examples() []Example {
	root := NewRootCommand(&app{})
	order := map[string]int{}
	for i, e := range examples {
		order[e.path] = i + 1
	}
	var out []Example
	walk(root, func(c *cobra.Command) {
		if c.Runnable() && !c.Hidden && c.Name() != "help" && c.Name() != "completion" && c.Annotations[groupOnly] == "" {
			out = append(out, Example{c.CommandPath(), c.Example})
		}
	})
	// In examples' order; verbs it does not list go last.
	slices.SortStableFunc(out, func(x, y Example) int {
		rank := func(p string) int {
			if r, ok := order[p]; ok {
				return r
			}
			return len(examples) + 1
		}
		return rank(x.Path) - rank(y.Path)
	})
	return out
}

// CheckCommandLine parses a pedigree command line (without the leading
// "pedigree") the way the command would, without running it: the verb must
// exist and be runnable, and every flag must be one the verb takes. The docs'
// test holds every command the README and docs/ show to it.
func CheckCommandLine(args []string) error {
	root := NewRootCommand(&app{})
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if !cmd.Runnable() {
		return fmt.Errorf("%q is not a verb (a group of verbs: %s)", cmd.CommandPath(), strings.Join(subcommandNames(cmd), ", "))
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	return nil
}

func subcommandNames(c *cobra.Command) []string {
	var names []string
	for _, s := range c.Commands() {
		names = append(names, s.Name())
	}
	return names
}
