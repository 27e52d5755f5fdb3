package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/store"
)

// exportBundle writes thread as a bundle to out ("-": stdout); a file is
// written beside its place and renamed into it, so a failed export leaves
// no part of one.
func (a *app) exportBundle(ctx context.Context, s *store.Engine, thread, out string) error {
	if out == "-" {
		_, err := store.ExportBundle(ctx, s, thread, a.stdout)
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*.tmp")
	if err != nil {
		return err
	}
	info, err := store.ExportBundle(ctx, s, thread, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), out)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	if a.json {
		return a.printJSON(bundleJSON(info, out))
	}
	fmt.Fprintf(a.stdout, "wrote %s: thread %s, %d checkpoints in %d namespaces, %d pending writes, %d runs (%d events), %d bytes\n",
		out, info.Source, info.Checkpoints, info.Namespaces, info.Writes, info.Runs, info.Events, info.Bytes)
	return nil
}

func bundleJSON(info store.BundleInfo, file string) map[string]any {
	return map[string]any{"file": file, "thread": info.Thread, "source": info.Source, "namespaces": info.Namespaces,
		"checkpoints": info.Checkpoints, "writes": info.Writes, "runs": info.Runs, "events": info.Events, "bytes": info.Bytes}
}

func (a *app) importCmd() *cobra.Command {
	var as, tenant string
	cmd := &cobra.Command{
		Use:   "import FILE [--as NEW] [--tenant T]",
		Short: "Create a thread from a bundle (cairn export --format bundle): its whole history, checked before anything is created",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for flag, v := range map[string]string{"--as": as, "--tenant": tenant} {
				if v != "" {
					if err := store.ValidateID(v); err != nil {
						return usagef("%s %q: %v", flag, v, err)
					}
				}
			}
			data, err := readBundleFile(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			// The bundle is checked before the store is opened, so that a
			// refused bundle creates no store either.
			if _, err := store.CheckBundle(bytes.NewReader(data), 0); err != nil {
				return bundleRefused(args[0], err)
			}
			s, err := a.open()
			if err != nil {
				return err
			}
			defer s.Close()
			info, err := store.ImportBundle(cmd.Context(), s, bytes.NewReader(data), store.ImportOptions{As: as, Tenant: tenant})
			if err != nil {
				return bundleRefused(args[0], err)
			}
			if a.json {
				return a.printJSON(bundleJSON(info, args[0]))
			}
			fmt.Fprintf(a.stdout, "imported %s as %s: %d checkpoints in %d namespaces, %d pending writes, %d runs (%d events)\n",
				info.Source, info.Thread, info.Checkpoints, info.Namespaces, info.Writes, info.Runs, info.Events)
			return nil
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "the new thread's id (default: the bundle's)")
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant that owns the new thread")
	return cmd
}

// readBundleFile reads a bundle file ("-": stdin), at most
// store.DefaultMaxBundle bytes.
func readBundleFile(stdin io.Reader, name string) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, &usageError{err}
		}
		defer f.Close()
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			return nil, usagef("%s: not a regular file", name)
		}
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, store.DefaultMaxBundle+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, nil
}

// bundleRefused is the error of a refused import: a bad bundle or id is a
// usage error (exit 2), naming the file.
func bundleRefused(file string, err error) error {
	if errors.Is(err, store.ErrBadBundle) {
		return &usageError{fmt.Errorf("%s: %w", file, err)}
	}
	return argError(err)
}
