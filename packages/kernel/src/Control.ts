/**
 * Events appended to a goal from outside its runner, by any process: a cancel request, an
 * options change. Each goes at the log's current end (again at the new end after a
 * conflict), and the goal's runner, here or elsewhere, folds it in and obeys it.
 */
import { Clock, Effect, Option, Predicate, Schema } from "effect"
import type * as Event from "./Event.js"
import * as Options from "./Options.js"
import { GoalNotFound, restore } from "./Runner.js"
import { StateStore, StoreError } from "./StateStore.js"

/** Ask a goal to stop, from any process: appends `CancelRequested`, which its runner obeys. */
export const cancel = (
  goalId: string,
  reason = "cancelled on request"
): Effect.Effect<"requested" | "already_terminated", StoreError | GoalNotFound, StateStore> =>
  appendExternal(goalId, "a cancel request", (at) => Effect.succeed<Event.Event>({ _tag: "CancelRequested", ...at, reason })).pipe(
    Effect.map((outcome) => (outcome === "already_terminated" ? outcome : "requested"))
  )

/**
 * Change an open goal's options from here on, from any process: appends `OptionsChanged` with
 * `change(current)`, which its runner (this or a later one) follows. Nothing is appended when
 * nothing changes.
 */
export const changeOptions = (
  goalId: string,
  change: (current: Options.Options) => Options.Input
): Effect.Effect<"changed" | "unchanged" | "already_terminated", StoreError | GoalNotFound | Options.InvalidOptions, StateStore> =>
  appendExternal(goalId, "an options change", (at) =>
    Effect.gen(function*() {
      const current = (yield* restore(goalId)).options
      const options = yield* Options.decode(change(current))
      return Schema.equivalence(Options.Options)(current, options) ? undefined : { _tag: "OptionsChanged", ...at, options }
    })).pipe(Effect.map((outcome) => (outcome === "requested" ? "changed" : outcome === "declined" ? "unchanged" : outcome)))

/** Where an event appended from outside the runner goes: the log's current end. */
interface End {
  readonly goalId: string
  readonly seq: number
  readonly iteration: number
  readonly at: number
}

/** Append one event at the log's end from outside the runner, again at the new end after a conflict. */
const appendExternal = <E>(
  goalId: string,
  what: string,
  draft: (end: End) => Effect.Effect<Event.Event | undefined, E, StateStore>
): Effect.Effect<"requested" | "declined" | "already_terminated", StoreError | GoalNotFound | E, StateStore> =>
  Effect.gen(function*() {
    const store = yield* StateStore
    const summary = yield* store.goal(goalId)
    if (Option.isNone(summary)) return yield* new GoalNotFound({ goalId })
    if (summary.value.status === "terminated") return "already_terminated" as const
    const { lastIteration: iteration, nextSeq: seq } = summary.value
    const event = yield* draft({ goalId, seq, iteration, at: yield* Clock.currentTimeMillis })
    if (event === undefined) return "declined" as const
    yield* store.append(goalId, seq, [event])
    return "requested" as const
  }).pipe(
    Effect.retry({ times: 50, while: (error) => Predicate.isTagged(error, "AppendConflict") }),
    Effect.catchTag("AppendConflict", () => new StoreError({ message: `could not append ${what} to goal ${goalId}: the log kept moving`, goalId }))
  )
