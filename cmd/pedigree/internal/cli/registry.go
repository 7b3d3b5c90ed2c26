package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/registry"
	"path/filepath"
)

func newRegistryCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Register principals at bootstrap, then freeze them for good",
		Args:  noArgs,
	}
	cmd.AddCommand(newRegistryAdd(a), newRegistryFreeze(a), newRegistrySeal(a), newRegistryList(a))
	return cmd
}

func newRegistryAdd(a *app) *cobra.Command {
	var tier, pubFile, newKey string
	var approver bool
	cmd := &cobra.Command{
		Use:   "add PRINCIPAL --tier internal|user|unverified|external (--public-key FILE | --new-key FILE) [--approver]",
		Short: "Register a principal (before freeze only)",
		Long: `Register a principal with its tier and public key. PRINCIPAL is kind:name: kind is
a lowercase letter then up to 31 of [a-z0-9_-]; name is a letter or digit then up to
127 of [A-Za-z0-9._@+-] (agent:planner, user:alice, tool:gmail_read).

--new-key FILE writes a new Ed25519 private key (PEM, mode 0600; never overwrites)
and registers its public half; --public-key FILE registers an existing key. The
store keeps only public keys. A key already registered for another principal, or
the operator's key, is refused: each principal signs with a key of its own. After
'registry freeze' nothing can be added.

--approver gives the principal approval authority: only such principals can
approve a denied call ('gate approve'), and only a user-tier principal can hold it.
A user:NAME principal at the user tier holds it by default (--approver=false to
withhold it); any other principal only when --approver says so. It is stored with
the principal and frozen with the registry.

Example:
  pedigree registry add user:alice --tier user --new-key alice.key --approver
  pedigree registry add tool:gmail_read --tier external --new-key gmail.key`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if (pubFile == "") == (newKey == "") {
				return usagef("give exactly one of --public-key FILE and --new-key FILE")
			}
			if registry.IsKMSRef(newKey) {
				// Else a key file named after the reference is written here,
				// and the person believes the key is in the KMS or token.
				return usagef("--new-key writes a new key file, and %s is a key reference: register a key held by a KMS or a token with --public-key REF", registry.DisplayRef(newKey))
			}
			if tier == "" {
				return usagef("--tier is required")
			}
			t, err := registry.ParseTier(tier)
			if err != nil {
				return usageError{fmt.Errorf("--tier: %w", err)}
			}
			if approver && t != registry.User {
				return usagef("--approver: only a user-tier principal can approve, and %s is %s", id, t)
			}
			// A person (user:NAME at the user tier) approves unless told not
			// to; anything else approves only when told to, and only at the
			// user tier: a tool registered as user does not.
			if !cmd.Flags().Changed("approver") {
				approver = t == registry.User && strings.HasPrefix(id, "user:")
			}
			if err := registry.ValidateID(id); err != nil {
				return err
			}
			e, err := a.openStore(cmd.Context(), "add a principal")
			if err != nil {
				return err
			}
			defer e.Close()
			reg, err := e.Registry(cmd.Context())
			if err != nil {
				return err
			}
			if reg.Frozen {
				// Refused by the engine, which logs the attempt; no key is
				// written for it.
				s, _, err := registry.GenerateSigner(nil)
				if err != nil {
					return err
				}
				return e.Bootstrap().AddPrincipal(cmd.Context(), registry.Principal{ID: id, Tier: t, PublicKey: s.Public(), Approver: approver})
			}
			if _, dup := reg.Lookup(id); dup {
				return fmt.Errorf("%w: %s", registry.ErrDuplicate, id)
			}
			var pub registry.PublicKey
			switch {
			case registry.IsKMSRef(pubFile):
				// The public half of a key held in a KMS: the private half
				// never comes to this host.
				s, err := registry.OpenSigner(cmd.Context(), pubFile, a.kmsTimeout())
				if err != nil {
					return fmt.Errorf("--public-key %s: %w", registry.DisplayRef(pubFile), err)
				}
				pub = s.Public()
			case pubFile != "":
				if pub, err = registry.LoadPrincipalKey(pubFile); err != nil {
					return err
				}
			default:
				s, priv, err := registry.GenerateSigner(nil)
				if err != nil {
					return err
				}
				if err := registry.WritePrivateKeyFile(newKey, priv); err != nil {
					return err
				}
				pub = s.Public()
			}
			if err := e.Bootstrap().AddPrincipal(cmd.Context(), registry.Principal{ID: id, Tier: t, PublicKey: pub, Approver: approver}); err != nil {
				if newKey != "" {
					safefile.Remove(filepath.Dir(newKey), filepath.Base(newKey), safefile.Regular) // nothing half-written: no key for a principal that is not registered
				}
				return err
			}
			return a.print(registryAddOutput{v: v1, ID: id, Tier: t.String(), Approver: approver, KeySHA256: registry.KeyFingerprint(pub)}, func(w io.Writer) {
				if approver {
					fmt.Fprintf(w, "registered %s (%s, approver)\n", id, t)
				} else {
					fmt.Fprintf(w, "registered %s (%s)\n", id, t)
				}
				if newKey != "" {
					fmt.Fprintf(w, "private key: %s\n", newKey)
				}
			})
		},
	}
	cmd.Flags().StringVar(&tier, "tier", "", "internal, user, unverified or external")
	cmd.Flags().StringVar(&pubFile, "public-key", "", "register this public key: a PEM file (Ed25519 or ECDSA P-256), or a KMS or PKCS#11 key reference (hashivault://NAME, awskms:///ARN, pkcs11:...) whose public half is fetched")
	cmd.Flags().StringVar(&newKey, "new-key", "", "write a new private key to this file and register its public half (a key in a KMS or token: --public-key REF)")
	cmd.Flags().BoolVar(&approver, "approver", false, "give the principal approval authority (user tier only; default: true for user:NAME at the user tier)")
	return cmd
}

func newRegistryFreeze(a *app) *cobra.Command {
	var opKey string
	cmd := &cobra.Command{
		Use:   "freeze [--operator-key FILE]",
		Short: "Freeze the registry: sign every principal and tau with the operator key",
		Long: `Write a freeze record, signed by the operator key, over a digest of every
principal (ID, tier, public key) and tau. From then on no principal can be added,
removed or changed by any path, and a store whose principal rows change behind the
engine's back refuses to open. Entries can be recorded only after freeze.

It prints the freeze digest (the sha256 of registry.freeze): kept outside the
data directory, it is a trust root like the operator public key (--trust-root).

Example:
  pedigree registry freeze
  pedigree registry freeze --operator-key /media/usb/pedigree-operator.key`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.openStore(cmd.Context(), "freeze the registry")
			if err != nil {
				return err
			}
			defer e.Close()
			if reg, err := e.Registry(cmd.Context()); err != nil {
				return err
			} else if reg.Frozen {
				return registry.ErrFrozen
			}
			op, err := a.loadOperator(opKey)
			if err != nil {
				return err
			}
			if err := e.Bootstrap().Freeze(cmd.Context(), op); err != nil {
				return err
			}
			reg, err := e.Registry(cmd.Context())
			if err != nil {
				return err
			}
			n := len(reg.Principals)
			return a.print(freezeOutput{v: v1, Frozen: true, Principals: n, Tau: reg.Tau, FreezeDigest: reg.FreezeDigest}, func(w io.Writer) {
				fmt.Fprintf(w, "registry frozen: %d principals, tau %v\nfreeze digest: %s\n", n, reg.Tau, reg.FreezeDigest)
			})
		},
	}
	cmd.Flags().StringVar(&opKey, "operator-key", "", "operator private key: a file or a KMS key reference (default: $PEDIGREE_OPERATOR_KEY, else the keys directory's operator-<h>.key, as init wrote it)")
	return cmd
}

func newRegistrySeal(a *app) *cobra.Command {
	var opKey string
	cmd := &cobra.Command{
		Use:   "seal [--operator-key FILE]",
		Short: "Seal the data directory's configuration again, after changing it",
		Long: `After freeze, the data directory's configuration counts only under the
operator's seal (DIR/config.seal, written by freeze): tools.yaml says which calls
are gated, trajectory-model.json which raise alerts, mcp/upstreams.json what each
MCP upstream runs and as whom, claude-hook.yaml who signs each Claude Code tool's
output, so a writer of the directory must not change them. A frozen store whose
files differ from the seal (changed, added or removed) is refused at open, and by
mcp run and the hook, saying which.

After changing either on purpose, seal them again with the operator key, then
restart a running server. Files given with --tools or --policies are yours and
are not sealed.

Example:
  pedigree registry seal
  pedigree registry seal --operator-key /media/usb/pedigree-operator.key`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			op, err := a.loadOperator(opKey)
			if err != nil {
				return err
			}
			root, err := a.trustRootOption()
			if err != nil {
				return err
			}
			// As openStore takes the store: hook events wait, a server on
			// demand is stopped, another process's turn is waited for.
			release := a.holdServers()
			defer release()
			if err := a.waitForDirectory(ctx, func() error {
				if err := a.refuseIfServed(ctx, "seal the configuration"); err != nil {
					return err
				}
				return pedigree.Seal(ctx, a.dir, op, append([]pedigree.Option{pedigree.WithClock(a.clock)}, root...)...)
			}); err != nil {
				return err
			}
			sealed, err := pedigree.SealedFiles(a.dir)
			if err != nil {
				return err
			}
			return a.print(sealOutput{v: v1, Sealed: sealed}, func(w io.Writer) {
				fmt.Fprintf(w, "sealed: %s\n", sealedText(sealed))
			})
		},
	}
	cmd.Flags().StringVar(&opKey, "operator-key", "", "operator private key: a file or a KMS key reference (default: $PEDIGREE_OPERATOR_KEY, else the keys directory's operator-<h>.key, as init wrote it)")
	return cmd
}

func sealedText(files []string) string {
	if len(files) == 0 {
		return "no configuration files (every tool is gated; no trajectory model)"
	}
	return strings.Join(files, ", ")
}

func newRegistryList(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the principals, their tiers and keys",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			reg, err := e.Registry(cmd.Context())
			if err != nil {
				return err
			}
			frozen, tau, ps := reg.Frozen, reg.Tau, reg.Principals
			rows := []principalOutput{}
			for _, p := range ps {
				pemBytes, err := registry.MarshalPrincipalKey(p.PublicKey)
				if err != nil {
					return errors.Join(err)
				}
				alg, _ := registry.Algorithm(p.PublicKey)
				rows = append(rows, principalOutput{p.ID, p.Tier.String(), string(pemBytes), alg, p.Approver})
			}
			out := registryListOutput{v: v1, Frozen: frozen, Tau: tau, FreezeDigest: reg.FreezeDigest, Principals: rows}
			return a.print(out, func(w io.Writer) {
				state := "not frozen"
				if frozen {
					state = "frozen"
				}
				fmt.Fprintf(w, "registry %s, tau %v, %d principals\n", state, tau, len(rows))
				for _, p := range ps {
					role := ""
					if p.Approver {
						role = "  approver"
					}
					if alg, _ := registry.Algorithm(p.PublicKey); alg != registry.AlgEd25519 {
						role += "  " + alg
					}
					fmt.Fprintf(w, "  %-40s %-10s key %s%s\n", p.ID, p.Tier, short(registry.KeyFingerprint(p.PublicKey)), role)
				}
			})
		},
	}
}
