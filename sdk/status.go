package sdk

import (
	"context"
	"errors"
	"time"
)

// StatusReporter is an optional interface a VoteSource may also implement
// to show operators something about itself: the node gateway lists its
// online nodes, a checkpoint source could list its checkpoints. vigil asks
// for it when an operator looks (`vigil status`, GET /v1/nodes, the status
// page), not every round.
//
// Status is called concurrently with Vote and the other calls (unlike them,
// it is not serialized), so it must be safe for that and answer quickly
// from memory: the host gives it a short deadline.
type StatusReporter interface {
	Status(ctx context.Context) (Status, error)
}

// Status is what a StatusReporter shows.
type Status struct {
	// Summary is one line, such as "4 of 5 nodes online".
	Summary string
	// Items are the things the source is made of, such as nodes.
	Items []StatusItem
}

// StatusItem is one thing a source is made of.
type StatusItem struct {
	// Name identifies the item, such as a node id.
	Name string
	// State is one word, such as "online" or "offline".
	State string
	// Detail is free text for operators; keep it free of secrets.
	Detail string
	// Labels are the item's labels, such as region=eu.
	Labels map[string]string
	// LastSeen is when the source last heard from the item (zero: unknown).
	LastSeen time.Time
}

// ErrNoStatus is returned by a host-side client (package sdk/host) whose plugin does not
// implement StatusReporter.
var ErrNoStatus = errors.New("the plugin reports no status")
