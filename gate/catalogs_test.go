package gate_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/gate"
)

func catalogFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "policies", "catalogs", "*.yaml"))
	if err != nil || len(files) != 6 {
		t.Fatalf("catalogs: %v %v", files, err)
	}
	return files
}

// TestShippedCatalogs: every shipped catalog loads, they merge, and their
// argument rules keep recipients, amounts, accounts, paths, URLs and
// commands protected and bodies, subjects and descriptions data.
func TestShippedCatalogs(t *testing.T) {
	c, err := gate.LoadCatalogs(catalogFiles(t)...)
	if err != nil {
		t.Fatal(err)
	}
	protected := map[string][]string{
		"email_send": {"to", "cc", "bcc"}, "email_forward": {"to"}, "bank_transfer": {"iban", "amount", "account"},
		"bank_schedule_transfer": {"iban", "amount"}, "bank_update_transfer": {"iban", "amount"},
		"chat_send_direct": {"recipient"}, "chat_send_channel": {"channel"}, "chat_invite": {"user"},
		"file_share": {"path", "email"}, "file_delete": {"path"}, "file_write": {"path"},
		"calendar_create_event": {"participants"}, "shell_exec": {"command"}, "web_fetch": {"url"},
	}
	data := map[string][]string{
		"email_send": {"subject", "body"}, "bank_transfer": {"memo"}, "chat_send_channel": {"body"},
		"file_write": {"content"}, "calendar_create_event": {"title", "description"},
	}
	for tool, args := range protected {
		tl, ok := c.Lookup(tool)
		if !ok || (tl.Sensitive != nil && !*tl.Sensitive) {
			t.Errorf("%s: missing or not sensitive", tool)
		}
		for _, a := range args {
			if r, ok := tl.Args[a]; !ok || !r.Trusted {
				t.Errorf("%s.%s is not protected", tool, a)
			}
		}
	}
	for tool, args := range data {
		tl, _ := c.Lookup(tool)
		for _, a := range args {
			if r, ok := tl.Args[a]; !ok || r.Trusted {
				t.Errorf("%s.%s is not data", tool, a)
			}
		}
	}
	for _, tool := range []string{"email_delete", "chat_remove", "file_delete", "calendar_cancel_event"} {
		if tl, _ := c.Lookup(tool); tl.OnSteered != gate.Deny {
			t.Errorf("%s: on_steered %q, want deny", tool, tl.OnSteered)
		}
	}
}

func TestCatalogMergeAndAliases(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	email := filepath.Join("..", "policies", "catalogs", "email.yaml")
	alias := write("alias.yaml", "aliases:\n  gmail_send_message: email_send\n")
	c, err := gate.LoadCatalogs(email, alias)
	if err != nil {
		t.Fatal(err)
	}
	tl, known := c.Lookup("gmail_send_message")
	if !known || !tl.Args["to"].Trusted || tl.Args["body"].Trusted {
		t.Fatalf("alias lookup: %+v %v", tl, known)
	}
	// The same file twice is the same rules: no conflict.
	if _, err := gate.LoadCatalogs(email, email); err != nil {
		t.Fatalf("identical definitions: %v", err)
	}
	bad := map[string][]string{
		"a tool defined twice differently": {email, write("other.yaml", "tools:\n  email_send: {sensitive: false}\n")},
		"an alias to nothing":              {write("dangling.yaml", "aliases:\n  x: nothing_here\n")},
		"an alias that is a tool":          {email, write("shadow.yaml", "aliases:\n  email_delete: email_send\n")},
		"an alias named twice":             {email, alias, write("alias2.yaml", "aliases:\n  gmail_send_message: email_draft\n")},
		"an unknown on_steered":            {write("steered.yaml", "tools:\n  x: {sensitive: true, on_steered: maybe}\n")},
	}
	for name, files := range bad {
		if _, err := gate.LoadCatalogs(files...); !errors.Is(err, gate.ErrCatalog) {
			t.Errorf("%s: %v, want ErrCatalog", name, err)
		}
	}
	if _, err := gate.LoadCatalogs(); err == nil || !strings.Contains(err.Error(), "no catalog") {
		t.Errorf("no files: %v", err)
	}
}
