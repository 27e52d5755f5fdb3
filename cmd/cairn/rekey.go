package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/internal/bench"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
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
	var vacuum bool
	cmd := &cobra.Command{
		Use:   "rekey [--vacuum]",
		Short: "Seal every stored blob with the newest encryption key (CAIRN_ENCRYPTION_KEYS), online; encrypts a plaintext store",
		Long: "rekey rewrites every checkpoint patch, snapshot and metadata, pending write, run record and run event " +
			"of the store with the first key of CAIRN_ENCRYPTION_KEYS (or CAIRN_ENCRYPTION_KEYS_FILE), opening old blobs " +
			"with any key listed. Each blob is rewritten in its own small transaction, only if it is still what was read, " +
			"so other processes can keep writing. Afterwards the old keys can be removed from the list. --vacuum then rebuilds the " +
			"database (SQLite: the file and its WAL; PostgreSQL: VACUUM FULL of the cairn_ tables) so that no plaintext the rewrite " +
			"replaced stays in its free space. See docs/encryption.md.",
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
			vac, canVacuum := s.Backend().(driver.Vacuumer)
			if vacuum && !canVacuum {
				return usagef("--vacuum: the store %s keeps nothing to vacuum", a.shownStore())
			}
			st, err := s.Rekey(cmd.Context())
			if err != nil {
				return err
			}
			if vacuum {
				if err := vac.Vacuum(cmd.Context()); err != nil {
					return err
				}
			}
			if a.json {
				return a.printJSON(st)
			}
			fmt.Fprintf(a.stdout, "rekeyed %s to key %s: %s rewritten; %d already current; %d changed meanwhile; passes: %d\n",
				a.shownStore(), st.Key, rewritten(st.Rewritten), st.Current, st.Changed, st.Passes)
			if vacuum {
				fmt.Fprintln(a.stdout, "vacuumed: the database was rebuilt without the space freed")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&vacuum, "vacuum", false, "then rebuild the database (SQLite: the file and its WAL; PostgreSQL: VACUUM FULL), so no replaced plaintext stays in its free space")
	return cmd
}

// rewritten lists the counts of RekeyStats.Rewritten in a fixed order.
func rewritten(m map[string]int64) string {
	var parts []string
	for _, k := range []string{"checkpoints", "snapshots", "writes", "runs", "events", "items"} {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

// benchEncryption is what cairn bench's --encryption and --rounds ask.
type benchEncryption struct {
	mode   string
	rounds int
}

func (be *benchEncryption) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&be.mode, "encryption", "off", "off, on (encrypted at rest: the keys of CAIRN_ENCRYPTION_KEYS, else a random key) or both (without then with, alternating --rounds times, and their ratio)")
	cmd.Flags().IntVar(&be.rounds, "rounds", 5, "with --encryption both: runs of each, the fastest kept")
}

// benchRun runs a benchmark workload: on a plaintext store, on an
// encrypted one (--encryption on) or on both, compared (both).
func (a *app) benchRun(ctx context.Context, cfg bench.Config, be benchEncryption) error {
	switch be.mode {
	case "off":
	case "on":
		opts, err := a.storeOptions()
		if err != nil {
			return err
		}
		if cfg.Keyring = opts.Keyring; cfg.Keyring == nil {
			cfg.Keyring = bench.RandomKeyring()
		}
	case "both":
		return a.benchCompare(ctx, cfg, be.rounds)
	default:
		return usagef("--encryption %q: want off, on or both", be.mode)
	}
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return argError(err)
	}
	return a.printBenchResult(res)
}

// benchCompare runs a workload without and with encryption and prints
// both and their ratio.
func (a *app) benchCompare(ctx context.Context, cfg bench.Config, rounds int) error {
	if rounds < 1 {
		return usagef("--rounds %d: want 1 or more", rounds)
	}
	c, err := bench.CompareEncryption(ctx, cfg, rounds)
	if err != nil {
		return argError(err)
	}
	if a.json {
		return a.printJSON(c)
	}
	printBench(a, c.Plain)
	fmt.Fprintln(a.stdout)
	printBench(a, c.Encrypted)
	fmt.Fprintf(a.stdout, "\nencryption at rest: %.1f µs/step vs %.1f µs/step without (fastest of %d runs each): %.3f×; median step %.3f×; CPU time %.3f×\n",
		c.Encrypted.USPerStep, c.Plain.USPerStep, c.Rounds, c.Ratio, c.MedianRatio, c.CPURatio)
	return nil
}
