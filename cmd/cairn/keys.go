package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
)

// keysCmd manages the API keys cairn serve --auth keys accepts.
func (a *app) keysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke the API keys of cairn serve --auth keys (each bound to a tenant)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(a.keysCreateCmd(), a.keysListCmd(), a.keysRevokeCmd())
	return cmd
}

func (a *app) keysCreateCmd() *cobra.Command {
	var tenant, name string
	cmd := &cobra.Command{
		Use:   "create --tenant T",
		Short: "Make an API key for a tenant; the key is printed once, the store keeps only its hash",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tenant == "" {
				return usagef("--tenant is required: the tenant the key acts for")
			}
			if err := store.ValidateID(tenant); err != nil {
				return usagef("--tenant %q: letters, digits and . _ : - (1 to 128, starting with a letter or digit)", tenant)
			}
			ks, done, err := a.keyStore(a.open)
			if err != nil {
				return err
			}
			defer done()
			key, rec, err := server.NewKey(cmd.Context(), ks, tenant, name, time.Now())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]string{"id": rec.ID, "tenant": rec.Tenant, "name": rec.Name, "key": key})
			}
			fmt.Fprintf(a.stderr, "API key %s for tenant %s (shown once; the store keeps only its hash):\n", rec.ID, rec.Tenant)
			fmt.Fprintln(a.stdout, key)
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the key acts for (required)")
	cmd.Flags().StringVar(&name, "name", "", "a name to recognise the key by")
	return cmd
}

func (a *app) keysListCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List API keys (ids, tenants, names; never the keys)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ks, done, err := a.keyStore(a.openRead)
			if err != nil {
				return err
			}
			defer done()
			keys, err := ks.Keys(cmd.Context(), tenant)
			if err != nil {
				return err
			}
			if a.json {
				out := []map[string]string{}
				for _, k := range keys {
					out = append(out, map[string]string{"id": k.ID, "tenant": k.Tenant, "name": k.Name, "created_at": time.Unix(0, k.CreatedAt).UTC().Format(time.RFC3339)})
				}
				return a.printJSON(out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tNAME\tCREATED")
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.ID, k.Tenant, k.Name, time.Unix(0, k.CreatedAt).UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's keys")
	return cmd
}

func (a *app) keysRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API key at once (requests with it answer 401)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ks, done, err := a.keyStore(a.openExisting)
			if err != nil {
				return err
			}
			defer done()
			if err := ks.DeleteKey(cmd.Context(), args[0]); err != nil {
				return argError(err)
			}
			fmt.Fprintf(a.stderr, "revoked API key %s\n", args[0])
			return nil
		},
	}
}

// keyStore opens the store with open and returns its key store, and how
// to close the store.
func (a *app) keyStore(open func() (*store.Engine, error)) (store.KeyStore, func(), error) {
	s, err := open()
	if err != nil {
		return nil, nil, err
	}
	ks, err := store.KeysOf(s)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return ks, func() { s.Close() }, nil
}
