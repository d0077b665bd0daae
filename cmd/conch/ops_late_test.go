package main

import (
	"context"
	"slices"
	"testing"

	"github.com/conch-dev/conch/ops"
)

// recorded is an ops.Recorder that keeps what it is given.
type recorded struct{ events []ops.Event }

func (r *recorded) Record(_ context.Context, e ops.Event) { r.events = append(r.events, e) }

// TestLateRecorderKeepsEarlyEvents: the inits started while the stack is
// built (conch run's, kept for its command) reach the operations'
// recorder once it is set, before the events recorded after it, instead
// of being dropped.
func TestLateRecorderKeepsEarlyEvents(t *testing.T) {
	var late lateRecorder
	early := ops.Init{Owner: "run", Result: "ok"}
	late.Record(context.Background(), early)
	r := &recorded{}
	late.set(r)
	after := ops.Init{Owner: "other", Result: "ok"}
	late.Record(context.Background(), after)
	if want := []ops.Event{early, after}; !slices.Equal(r.events, want) {
		t.Errorf("recorded %v, want %v", r.events, want)
	}
	var unset lateRecorder
	for range 2 * maxEarly {
		unset.Record(context.Background(), early)
	}
	if len(unset.early) != maxEarly {
		t.Errorf("kept %d events before a recorder, want at most %d", len(unset.early), maxEarly)
	}
}
