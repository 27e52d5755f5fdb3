package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

func main() {
	s, err := sqlite.OpenStore("/tmp/w1k.db", sqlite.Options{}, store.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for k := 0; k < 5; k++ {
		t0 := time.Now()
		_, err := s.Load(ctx, store.LoadRequest{Thread: "0"})
		fmt.Println("load", k, time.Since(t0), err)
	}
	t0 := time.Now()
	for k := 0; k < 300; k++ {
		s.Load(ctx, store.LoadRequest{Thread: "0"})
	}
	fmt.Println("avg", time.Since(t0)/300)
}
