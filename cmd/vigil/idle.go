package main

import (
	"context"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/sdk"
)

// idleSource stands in for a source the probed site does not use: it is
// never asked, so its plugin is not started.
type idleSource struct{ name string }

func (s idleSource) Name() string                                         { return s.name }
func (s idleSource) Start(context.Context) hcl.Diagnostics                { return nil }
func (s idleSource) Vote(context.Context, sdk.Ballot) ([]sdk.Vote, error) { return nil, nil }
func (s idleSource) Close()                                               {}
