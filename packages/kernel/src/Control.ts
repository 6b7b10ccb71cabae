/**
 * Events appended to a goal from outside its runner, by any process: a cancel request, an
 * options change. Each goes at the log's current end (again at the new end after a
 * conflict), and the goal's runner, here or elsewhere, folds it in and obeys it.
 */
import { Clock, Effect, Option, Predicate, Schema } from "effect"
import type * as Event from "./Event.js"
import * as Options from "./Options.js"
import { GoalNotFound, restore } from "./Goal.js"
import { StateStore, StoreError } from "./StateStore.js"

/**
 * Ask a goal to stop, from any process: appends `CancelRequested`, which its runner obeys. Its open
 * sub-goals (`GoalSummary.parent`) are cancelled with it, and theirs in turn.
 */
export const cancel = (
  goalId: string,
  reason = "cancelled on request"
): Effect.Effect<"requested" | "already_terminated", StoreError | GoalNotFound, StateStore> =>
  appendExternal(goalId, "a cancel request", (at) => Effect.succeed<Event.Event>({ _tag: "CancelRequested", ...at, reason })).pipe(
    Effect.tap(() => cancelChildren(goalId)),
    Effect.map((outcome) => (outcome === "already_terminated" ? outcome : "requested"))
  )

/** Cancel the open sub-goals of `goalId`, each with its own. */
const cancelChildren = (goalId: string): Effect.Effect<void, StoreError, StateStore> =>
  Effect.flatMap(StateStore, (store) => store.goals({ parent: goalId, status: "open" })).pipe(
    Effect.flatMap((children) =>
      Effect.forEach(children, (child) => Effect.catchTag(cancel(child.goalId, `its parent goal ${goalId} was cancelled`), "@rx/kernel/GoalNotFound", () => Effect.void), { discard: true })
    )
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

/** A message a goal cannot take: it has ended (a message reaches only an open goal), or the text is empty. */
export class MessageRefused extends Schema.TaggedError<MessageRefused>()("@rx/kernel/MessageRefused", {
  goalId: Schema.String,
  message: Schema.String
}) {}

/**
 * Tell a goal something, from any process: appends `MessageSent`, which the model is shown at its
 * next request, once, as the user's message; a call in flight runs on. A suspended goal gets it
 * when resumed. A goal that has ended is refused: continuing it starts a new goal.
 */
export const say = (
  goalId: string,
  message: { readonly text: string; readonly by: string; readonly key?: string | undefined }
): Effect.Effect<"sent" | "already_sent", StoreError | GoalNotFound | MessageRefused, StateStore> =>
  Effect.gen(function*() {
    if (message.text.trim() === "") return yield* new MessageRefused({ goalId, message: "the message is empty: say something" })
    const { key } = message
    const outcome = yield* appendExternal(goalId, "a message", (at) =>
      Effect.gen(function*() {
        // A message with a key the log already holds was sent by an earlier attempt: nothing to append.
        if (key !== undefined) {
          const events = yield* Effect.flatMap(StateStore, (store) => store.load(goalId))
          if (events.some((e) => e._tag === "MessageSent" && e.key === key)) return undefined
        }
        return { _tag: "MessageSent", ...at, by: message.by, text: message.text, ...(key === undefined ? {} : { key }) } satisfies Event.Event
      }))
    if (outcome === "declined") return "already_sent" as const
    if (outcome === "already_terminated") {
      return yield* new MessageRefused({
        goalId,
        message: `goal ${goalId} has ended, so no message can reach it: continue it as a new goal with rx run --continue ${goalId} "<your message>"`
      })
    }
    return "sent" as const
  })

/** No call of this goal waits for a decision with this id (or none waits at all). */
export class NothingToDecide extends Schema.TaggedError<NothingToDecide>()("@rx/kernel/NothingToDecide", {
  goalId: Schema.String,
  message: Schema.String
}) {}

/**
 * Decide on the call a goal waits for, from any process: appends `ApprovalDecided`, which the
 * goal's next runner follows (an approved call runs exactly as requested, with no new model
 * call; a denied one is recorded as a rejection the model sees). `callId` defaults to the
 * awaited call, and must match it when given.
 */
export const decide = (
  goalId: string,
  decision: { readonly approved: boolean; readonly reason: string; readonly by: string; readonly callId?: string | undefined }
): Effect.Effect<"decided" | "already_terminated", StoreError | GoalNotFound | NothingToDecide, StateStore> =>
  appendExternal(goalId, "a decision", (at) =>
    Effect.gen(function*() {
      const { awaiting } = yield* restore(goalId)
      if (awaiting === null || awaiting.decision !== null) {
        return yield* new NothingToDecide({ goalId, message: `goal ${goalId} has no call waiting for approval` })
      }
      if (decision.callId !== undefined && decision.callId !== awaiting.callId) {
        return yield* new NothingToDecide({ goalId, message: `goal ${goalId} waits for call ${awaiting.callId}, not ${decision.callId}` })
      }
      const { approved, by, reason } = decision
      return { _tag: "ApprovalDecided", ...at, callId: awaiting.callId, approved, reason, by } satisfies Event.Event
    })).pipe(Effect.map((outcome) => (outcome === "already_terminated" ? outcome : "decided")))

/** Approve the call a goal waits for (see `decide`). */
export const approve = (goalId: string, by: string, callId?: string) =>
  decide(goalId, { approved: true, reason: "approved", by, callId })

/** Deny the call a goal waits for (see `decide`); the model is told `reason`. */
export const deny = (goalId: string, by: string, reason: string, callId?: string) =>
  decide(goalId, { approved: false, reason, by, callId })

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
    Effect.retry({ times: 50, while: (error) => Predicate.isTagged(error, "@rx/kernel/AppendConflict") }),
    Effect.catchTag("@rx/kernel/AppendConflict", () => new StoreError({ message: `could not append ${what} to goal ${goalId}: the log kept moving`, goalId }))
  )
