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
			if cmd.Flags().Changed("content") == cmd.Flags().Changed("content-file") {
				return usagef("give exactly one of --content and --content-file")
			}
			body := []byte(content)
			if contentFile != "" {
				b, err := readLimited(contentFile, lineage.MaxContentBytes)
				if err != nil {
					return err
				}
				body = b
			}
			k, err := lineage.ParseKind(kind)
			if err != nil {
				return err
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
				if ps, err = parseParents(cmd.Context(), e, parents); err != nil {
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
	f.StringVar(&key, "key", "", "its private key file")
	f.StringVar(&session, "session", "", "the session the entry belongs to")
	f.StringVar(&kind, "kind", "memory", "prompt, tool_output, memory, summary or retrieval")
	f.StringVar(&content, "content", "", "the content")
	f.StringVar(&contentFile, "content-file", "", "read the content from a file")
	f.StringArrayVar(&parents, "parent", nil, "a parent entry, ID[=WEIGHT] (repeatable)")
	f.BoolVar(&storeContent, "store-content", false, "store the content itself, not only its digest")
	return cmd
}

func parseParents(ctx context.Context, e pedigree.Backend, specs []string) ([]lineage.Parent, error) {
	out := make([]lineage.Parent, 0, len(specs))
	for _, spec := range specs {
		idPart, wPart, hasW := strings.Cut(spec, "=")
		w := 1.0
		if hasW {
			v, err := strconv.ParseFloat(wPart, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: --parent %s: weight %q is not a number", lineage.ErrMalformed, spec, wPart)
			}
			w = v
		}
		id, err := e.Resolve(ctx, idPart)
		if err != nil {
			return nil, fmt.Errorf("--parent %s: %w", spec, err)
		}
		out = append(out, lineage.Parent{ID: id, Weight: w})
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
