package flow

import (
	"context"

	"github.com/cairn-dev/cairn/state"
)

// TypedNode adapts a node that reads typed state S. The document is decoded
// (and migrated, when the schema has migrations) before each call.
func TypedNode[S any](typed *state.Typed[S], fn func(ctx context.Context, s S) (state.Update, error)) NodeFunc {
	return func(ctx context.Context, d state.Doc) (state.Update, error) {
		s, err := typed.Decode(d)
		if err != nil {
			return nil, err
		}
		return fn(ctx, s)
	}
}

// TypedRoute adapts a router that reads typed state S.
func TypedRoute[S any](typed *state.Typed[S], fn func(ctx context.Context, s S) ([]Target, error)) RouteFunc {
	return func(ctx context.Context, d state.Doc) ([]Target, error) {
		s, err := typed.Decode(d)
		if err != nil {
			return nil, err
		}
		return fn(ctx, s)
	}
}
