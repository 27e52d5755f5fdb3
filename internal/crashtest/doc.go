// Package crashtest is the one harness of Cairn's crash tests: a test
// binary runs itself again as a child process that does the work (RunChild,
// Start), the parent kills it with SIGKILL at a chosen moment (Kill,
// WaitFor), and then checks what the store kept. Tests in flow and agent
// use it; the CLI's kill tests drive the real cairn binary the same way.
package crashtest
