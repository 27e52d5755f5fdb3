package redact_test

import (
	"fmt"

	"github.com/cairn-dev/cairn/redact"
)

func Example() {
	r, err := redact.New(redact.Config{Keys: []string{"ssn"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(r.JSON([]byte(`{"user":"ann","apiKey":"k-123","ssn":"078-05-1120","note":"use sk-abcdefghijklmnopqrstu"}`))))
	fmt.Println(r.String("Authorization: Bearer abcdefgh12345678"))
	// Output:
	// {"apiKey":"[REDACTED]","note":"use [REDACTED]","ssn":"[REDACTED]","user":"ann"}
	// Authorization: [REDACTED]
}

// A model's reply, token by token: each token is shown as soon as it
// cannot be part of a secret; a secret's pieces are held back, then
// shown as "[REDACTED]".
func ExampleRedactor_Stream() {
	s := redact.Default().WithSecrets("hunter2hunter2").Stream()
	for _, token := range []string{"The", " key", " is", " sk-abc", "defghij", "klmnopqr", ",", " the", " password", " hunter2", "hunter2", "."} {
		fmt.Printf("%q\n", s.Write(token))
	}
	fmt.Printf("%q\n", s.Flush())
	// Output:
	// "The"
	// " key"
	// " is"
	// " "
	// ""
	// ""
	// "[REDACTED],"
	// " the"
	// " password"
	// " "
	// ""
	// "[REDACTED]."
	// ""
}
