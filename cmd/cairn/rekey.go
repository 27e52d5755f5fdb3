package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/store"
)

// storeOptions are the engine options of the stores the CLI opens: the
// logger, and the keyring of CAIRN_ENCRYPTION_KEYS or
// CAIRN_ENCRYPTION_KEYS_FILE (bad keys are a usage error: exit 2; the
// error never holds key material).
func (a *app) storeOptions() (store.Options, error) {
	ring, err := store.KeyringFromEnv(a.getenv)
	if err != nil {
		return store.Options{}, &usageError{err}
	}
	return store.Options{Logger: a.logger, Keyring: ring}, nil
}

func (a *app) rekeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rekey",
		Short: "Seal every stored blob with the newest encryption key (CAIRN_ENCRYPTION_KEYS), online; encrypts a plaintext store",
		Long: "rekey rewrites every checkpoint patch, snapshot and metadata, pending write, run record and run event " +
			"of the store with the first key of CAIRN_ENCRYPTION_KEYS (or CAIRN_ENCRYPTION_KEYS_FILE), opening old blobs " +
			"with any key listed. Each blob is rewritten in its own small transaction, only if it is still what was read, " +
			"so other processes can keep writing. Afterwards the old keys can be removed from the list. See docs/encryption.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := a.storeOptions()
			if err != nil {
				return err
			}
			if opts.Keyring == nil {
				return usagef("rekey needs the keys: set %s or %s (newest first)", store.EnvEncryptionKeys, store.EnvEncryptionKeysFile)
			}
			s, err := a.openExisting()
			if err != nil {
				return err
			}
			defer s.Close()
			st, err := s.Rekey(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(st)
			}
			fmt.Fprintf(a.stdout, "rekeyed %s to key %s: %s rewritten; %d already current; %d changed meanwhile (%d passes)\n",
				a.shownStore(), st.Key, rewritten(st.Rewritten), st.Current, st.Changed, st.Passes)
			return nil
		},
	}
}

// rewritten lists the counts of RekeyStats.Rewritten in a fixed order.
func rewritten(m map[string]int64) string {
	var parts []string
	for _, k := range []string{"checkpoints", "snapshots", "writes", "runs", "events", "items"} {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}
