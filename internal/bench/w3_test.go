package bench

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
)

// childArgsEnv, when set to a JSON list of arguments, makes the test
// binary the bench's server process (ServeMain) instead of running tests.
const childArgsEnv = "CAIRN_BENCH_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsEnv); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil || len(argv) == 0 || argv[0] != ServeCommand {
			os.Stderr.WriteString(childArgsEnv + ": want [\"" + ServeCommand + "\", flags…]\n")
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := ServeMain(ctx, argv[1:], os.Stdout)
		stop()
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testProgram runs this test binary as the bench's server process.
func testProgram(args ...string) *exec.Cmd {
	b, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(b))
	return cmd
}

func TestW3Quick(t *testing.T) {
	res, err := RunW3(context.Background(), W3Config{Turns: 20, Program: testProgram})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	t.Log(string(b))
}

func TestW4Quick(t *testing.T) {
	res, err := RunW4(context.Background(), W4Config{Threads: 300, Repeat: 3, Program: testProgram})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	t.Log(string(b))
}
