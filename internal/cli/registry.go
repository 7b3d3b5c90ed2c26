package cli

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/registry"
)

func newRegistryCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Register principals at bootstrap, then freeze them for good",
		Args:  noArgs,
	}
	cmd.AddCommand(newRegistryAdd(a), newRegistryFreeze(a), newRegistryList(a))
	return cmd
}

func newRegistryAdd(a *app) *cobra.Command {
	var tier, pubFile, newKey string
	cmd := &cobra.Command{
		Use:   "add PRINCIPAL --tier internal|user|unverified|external (--public-key FILE | --new-key FILE)",
		Short: "Register a principal (before freeze only)",
		Long: `Register a principal with its tier and public key. PRINCIPAL is kind:name: kind is
a lowercase letter then up to 31 of [a-z0-9_-]; name is a letter or digit then up to
127 of [A-Za-z0-9._@+-] (agent:planner, user:alice, tool:gmail_read).

--new-key FILE writes a new Ed25519 private key (PEM, mode 0600; never overwrites)
and registers its public half; --public-key FILE registers an existing key. The
store keeps only public keys. After 'registry freeze' nothing can be added.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if (pubFile == "") == (newKey == "") {
				return usagef("give exactly one of --public-key FILE and --new-key FILE")
			}
			if tier == "" {
				return usagef("--tier is required")
			}
			t, err := registry.ParseTier(tier)
			if err != nil {
				return err
			}
			if err := registry.ValidateID(id); err != nil {
				return err
			}
			if err := a.refuseIfServed(cmd.Context(), "add a principal"); err != nil {
				return err
			}
			e, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			reg, err := e.Registry(cmd.Context())
			if err != nil {
				return err
			}
			if reg.Frozen {
				return registry.ErrFrozen
			}
			if _, dup := reg.Lookup(id); dup {
				return fmt.Errorf("%w: %s", registry.ErrDuplicate, id)
			}
			var pub ed25519.PublicKey
			if pubFile != "" {
				if pub, err = registry.LoadPublicKey(pubFile); err != nil {
					return err
				}
			} else {
				s, priv, err := registry.GenerateSigner(nil)
				if err != nil {
					return err
				}
				if err := registry.WritePrivateKeyFile(newKey, priv); err != nil {
					return err
				}
				pub = s.Public()
			}
			if err := e.AddPrincipal(cmd.Context(), registry.Principal{ID: id, Tier: t, PublicKey: pub}); err != nil {
				if newKey != "" {
					os.Remove(newKey) // nothing half-written: no key for a principal that is not registered
				}
				return err
			}
			return a.print(registryAddOutput{v: v1, ID: id, Tier: t.String(), KeySHA256: registry.KeyFingerprint(pub)}, func(w io.Writer) {
				fmt.Fprintf(w, "registered %s (%s)\n", id, t)
				if newKey != "" {
					fmt.Fprintf(w, "private key: %s\n", newKey)
				}
			})
		},
	}
	cmd.Flags().StringVar(&tier, "tier", "", "internal, user, unverified or external")
	cmd.Flags().StringVar(&pubFile, "public-key", "", "register this Ed25519 public key (PEM)")
	cmd.Flags().StringVar(&newKey, "new-key", "", "write a new private key here and register its public half")
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
engine's back refuses to open. Entries can be recorded only after freeze.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opKey == "" {
				opKey = filepath.Join(a.dir, pedigree.OperatorKeyFile)
			}
			if err := a.refuseIfServed(cmd.Context(), "freeze the registry"); err != nil {
				return err
			}
			e, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			if reg, err := e.Registry(cmd.Context()); err != nil {
				return err
			} else if reg.Frozen {
				return registry.ErrFrozen
			}
			op, err := registry.LoadSigner(opKey)
			if err != nil {
				return err
			}
			if err := e.Freeze(cmd.Context(), op); err != nil {
				return err
			}
			reg, err := e.Registry(cmd.Context())
			if err != nil {
				return err
			}
			n := len(reg.Principals)
			return a.print(freezeOutput{v: v1, Frozen: true, Principals: n, Tau: reg.Tau}, func(w io.Writer) {
				fmt.Fprintf(w, "registry frozen: %d principals, tau %v\n", n, reg.Tau)
			})
		},
	}
	cmd.Flags().StringVar(&opKey, "operator-key", "", "operator private key (default DIR/operator.key)")
	return cmd
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
				pemBytes, err := registry.MarshalPublicKey(p.PublicKey)
				if err != nil {
					return errors.Join(err)
				}
				rows = append(rows, principalOutput{p.ID, p.Tier.String(), string(pemBytes)})
			}
			out := registryListOutput{v: v1, Frozen: frozen, Tau: tau, Principals: rows}
			return a.print(out, func(w io.Writer) {
				state := "not frozen"
				if frozen {
					state = "frozen"
				}
				fmt.Fprintf(w, "registry %s, tau %v, %d principals\n", state, tau, len(rows))
				for _, p := range ps {
					fmt.Fprintf(w, "  %-40s %-10s key %s\n", p.ID, p.Tier, short(registry.KeyFingerprint(p.PublicKey)))
				}
			})
		},
	}
}
