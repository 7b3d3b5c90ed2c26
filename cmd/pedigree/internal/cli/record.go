package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/lineage"
)

func newRecordCommand(a *app) *cobra.Command {
	var as, key, session, kind, content, contentFile string
	var parents []string
	var storeContent bool
	cmd := &cobra.Command{
		Use:   "record --as PRINCIPAL --key FILE [--session S] [--kind KIND] (--content TEXT | --content-file FILE) [--parent ID[=WEIGHT]]...",
		Short: "Sign and record an entry",
		Long: `Sign an entry as PRINCIPAL with its private key and record it. The entry's tier is
the principal's, never the caller's. Prints the new entry's ID.

KIND is prompt, tool_output, memory (default), summary, retrieval.
--parent ID[=WEIGHT] names an entry this one derives from, with an attribution
weight in [0, 1] (default 1); an edge at or above tau carries taint. IDs may be
abbreviated to a unique prefix of at least 8 hex characters.

An entry recorded in a session without --parent derives from the session's whole
context (every entry recorded in it or recalled into it) with strong edges, unless
its principal is a user: (what a person typed has no parents): an agent read all
of it, and a tool's output is made from what the agent handed the tool. --parent
replaces that with your attribution (a tool's output names its call). Content is
stored only as a digest unless --store-content is given.

--key FILE must be readable by its owner only (mode 0600 or 0400), as ssh
requires; a key others can read is refused.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("session") {
				return usagef("--session S is required: the session whose context the entry joins (--session '' records it outside every session, where only a --parent or --justification that names it reaches it)")
			}
			if cmd.Flags().Changed("content") == cmd.Flags().Changed("content-file") {
				return usagef("give exactly one of --content and --content-file")
			}
			k, err := lineage.ParseKind(kind)
			if err != nil {
				return usageError{fmt.Errorf("--kind: %w", err)}
			}
			specs, err := parentSpecs(parents)
			if err != nil {
				return err
			}
			body := []byte(content)
			if contentFile != "" {
				b, err := readLimited(contentFile, lineage.MaxContentBytes)
				if err != nil {
					return err
				}
				body = b
			}
			if k == lineage.KindCall || k == lineage.KindApproval || k == lineage.KindRejection || k == lineage.KindPlan {
				return fmt.Errorf("%w: calls are recorded by 'gate check', approvals by 'gate approve', rejections by 'gate reject' and plans by 'plan record'", lineage.ErrMalformed)
			}
			e, s, err := a.backendAs(cmd.Context(), as, key)
			if err != nil {
				return err
			}
			defer e.Close()
			var ps []lineage.Parent
			if len(parents) > 0 {
				if ps, err = resolveParents(cmd.Context(), e, specs); err != nil {
					return err
				}
			}
			n, err := e.Record(cmd.Context(), s, pedigree.Entry{Principal: as, Kind: k, Session: session, Content: body, Parents: ps, StoreContent: storeContent})
			if err != nil {
				return err
			}
			reg, err := e.Registry(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(entryJSON(n, n.Edges(reg.Tau)), func(w io.Writer) { fmt.Fprintln(w, n.ID) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&as, "as", "", "the principal that signs")
	f.StringVar(&key, "key", "", "its private key: a file, or a KMS or PKCS#11 key reference (hashivault://NAME, pkcs11:..., see docs/keys.md)")
	f.StringVar(&session, "session", "", "the session the entry belongs to")
	f.StringVar(&kind, "kind", "memory", "prompt, tool_output, memory, summary or retrieval")
	f.StringVar(&content, "content", "", "the content")
	f.StringVar(&contentFile, "content-file", "", "read the content from a file")
	f.StringArrayVar(&parents, "parent", nil, "a parent entry, ID[=WEIGHT] (repeatable)")
	f.BoolVar(&storeContent, "store-content", false, "store the content itself, not only its digest")
	return cmd
}

// parentSpec is one --parent ID[=WEIGHT], checked for form.
type parentSpec struct {
	spec, id string
	weight   float64
}

// parentSpecs checks the form of --parent values (an ID prefix of hex, a
// weight in [0, 1]): a malformed one is a usage error; whether the entry
// exists is the store's to say (resolveParents).
func parentSpecs(specs []string) ([]parentSpec, error) {
	out := make([]parentSpec, 0, len(specs))
	for _, spec := range specs {
		idPart, wPart, hasW := strings.Cut(spec, "=")
		w := 1.0
		if hasW {
			v, err := strconv.ParseFloat(wPart, 64)
			if err != nil {
				return nil, usageError{fmt.Errorf("%w: --parent %s: weight %q is not a number", lineage.ErrMalformed, spec, wPart)}
			}
			if v < 0 || v > 1 || v != v {
				return nil, usageError{fmt.Errorf("%w: --parent %s: weight %v outside [0, 1]", lineage.ErrMalformed, spec, v)}
			}
			w = v
		}
		if !validIDPrefix(idPart) {
			return nil, usageError{fmt.Errorf("--parent %s: %w: %q is not an entry ID (at least 8 lowercase hex characters)", spec, lineage.ErrMalformed, idPart)}
		}
		out = append(out, parentSpec{spec, idPart, w})
	}
	return out, nil
}

// validIDPrefix says whether s has the form of an entry ID or of a prefix
// of one (as lineage's Resolve wants it).
func validIDPrefix(s string) bool {
	if len(s) < lineage.MinPrefix || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseParents checks and looks up --parent values.
func parseParents(ctx context.Context, e pedigree.Backend, specs []string) ([]lineage.Parent, error) {
	ps, err := parentSpecs(specs)
	if err != nil {
		return nil, err
	}
	return resolveParents(ctx, e, ps)
}

// resolveParents looks the parents up.
func resolveParents(ctx context.Context, e pedigree.Backend, specs []parentSpec) ([]lineage.Parent, error) {
	out := make([]lineage.Parent, 0, len(specs))
	for _, s := range specs {
		id, err := e.Resolve(ctx, s.id)
		if err != nil {
			return nil, fmt.Errorf("--parent %s: %w", s.spec, err)
		}
		out = append(out, lineage.Parent{ID: id, Weight: s.weight})
	}
	return out, nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", lineage.ErrMalformed, path, limit)
	}
	return b, nil
}

func newRecallCommand(a *app) *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "recall --session S ID...",
		Short: "Recall stored entries into a session's context",
		Long: `Put stored entries (memories) into a session's context, so that what the agent
writes or calls there next derives from them. This is how taint crosses sessions
through memory. The recall is also appended to the session's trajectory.`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if session == "" {
				return usagef("--session is required")
			}
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			ids := make([]string, 0, len(args))
			for _, p := range args {
				id, err := e.Resolve(cmd.Context(), p)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			if err := e.Recall(cmd.Context(), session, ids); err != nil {
				return err
			}
			return a.print(recallOutput{v: v1, Session: session, Recalled: ids}, func(w io.Writer) {
				fmt.Fprintf(w, "recalled %d entries into session %s\n", len(ids), session)
			})
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "the session")
	return cmd
}
