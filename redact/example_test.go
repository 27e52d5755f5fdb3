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
