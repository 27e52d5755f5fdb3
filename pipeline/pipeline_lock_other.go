//go:build !unix

package pipeline

// lockDir is a no-op on systems without flock: each file is still replaced
// atomically, but two processes writing one thread's files at once are not
// ordered there.
func lockDir(string) (func(), error) {
	return func() {}, nil
}
