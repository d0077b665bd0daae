// Package tasks is conch's generic background task runtime: ids, owners, reads, kills, notices.
//
// Make a Runtime with New, hand it work with Runtime.Start (a Handle: see
// Example), and read, wait for, list and kill that work on behalf of its
// owner; Runtime.Close stops everything.
//
// A task is any background work that a producer hands over as a [Handle]:
// an incremental output reader, a cancel hook, a done signal and a final
// [Outcome]. bash is one producer; a PTY or a sub-agent could be others. The
// runtime never looks inside the work, so it does not import the shell seam.
//
// # Ids and owners
//
// Every task belongs to the owner (a session) that started it. Ids are
// "<kind>-<N>", one counter per kind, counting from 1; a number is consumed
// only by a start that really succeeded. An owner sees and touches only its
// own tasks: every per-task call checks, in this order, that the id is known
// ([*UnknownTaskError]) and that it belongs to the caller
// ([*ForeignTaskError]).
//
// # Life cycle
//
//	running ──Kill──▶ stopping
//	   │                 │
//	   └──── Handle.Done closed ────▶ completed | killed | failed
//
// The first settlement wins: the status and outcome never change afterwards.
// A task counts against its owner's limit ([Options.MaxPerSession]) while it
// is running or stopping, that is until its Handle's Done channel is closed;
// a start in progress holds a slot too, so concurrent starts of one owner
// never exceed the limit.
//
// # Outcomes
//
// A settled task's [Outcome] holds the facts as fields (exit code, signal,
// whether its own timeout stopped it) and renders them as a status line,
// "[status: killed, timed out after 800ms, signal: SIGTERM]", so that no
// layer above parses text.
//
// # Completion notices
//
// A task that settles on its own (no Kill, no disposal) leaves one pending
// notice for its owner, drained with [Runtime.Notices]: a [Notice] with the
// task's snapshot and the last lines of the output its owner has not read,
// taken with [Handle.Peek], which consumes nothing. A consuming read of the
// settled task by its owner collects its result and withdraws (or
// prevents) that notice, so a model is never told about output it has
// already seen. The runtime words no tool names: the layer that offers
// tools to a model words notices and the hint of a [LimitError].
//
// # Concurrency and resources
//
// A Runtime is safe for concurrent use. Locking is per owner: one owner's
// calls never wait on another owner's tasks, and List reads only the
// caller's index. A short global lock guards the id table and is held for
// writing only while a task is registered or forgotten. Each live task costs
// one small record and one watcher goroutine (blocked on Handle.Done); the
// runtime keeps no output buffers of its own. No goroutine of the runtime
// outlives [Runtime.Dispose] of the owner or [Runtime.Close].
//
// An owner keeps at most [Options.MaxFinished] settled tasks (100 by
// default). Past that the oldest settled ones are forgotten, those whose
// result was collected first: their ids become unknown and the runtime
// drops their Handles, so that whatever output a Handle holds can be
// freed. A task whose notice is still pending is forgotten only when every
// settled task of its owner owes one, and its notice is dropped with it.
package tasks
