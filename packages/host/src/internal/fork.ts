/** The pure part of `Fork` (it re-exports all of it), apart from the log-reading entry that loads `forks` lazily. */
import { type Event, Runner, StateStore } from "@rx/kernel"
import { Clock, Effect, Either, Option, Schema } from "effect"

/** A fork that cannot be made: no such iteration, or not a goal's log. */
export class ForkError extends Schema.TaggedError<ForkError>()("@rx/host/ForkError", { message: Schema.String }) {}

/** What changes at the fork, besides what `rx resume` records (model, limits, workspace). */
export interface Changes {
  /** Instructions for the fork's prompts from here on, in place of the old goal's. */
  readonly instructions?: string | undefined
}

/** Iterations a goal completed: the most a fork may copy. */
export const completed = (events: ReadonlyArray<Event.Event>): number => events.filter((e) => e._tag === "IterationCompleted").length

/**
 * The fork's log, pure: `GoalSubmitted` (the old goal's, with the new id, `at` and `forkedFrom`),
 * then the old events from seq 1 up to the `IterationCompleted` of iteration `at`, each with the
 * new goal's id and the call ids of the new goal.
 */
export const events = (
  origin: ReadonlyArray<Event.Event>,
  at: number,
  forkId: string,
  now: number,
  changes: Changes = {}
): Either.Either<ReadonlyArray<Event.Event>, ForkError> => {
  const submitted = origin[0]
  if (submitted === undefined || submitted._tag !== "GoalSubmitted") return Either.left(new ForkError({ message: "a goal's log must start with GoalSubmitted" }))
  const oldId = submitted.goalId
  const end = origin.findIndex((e) => e._tag === "IterationCompleted" && e.iteration === at)
  if (!Number.isSafeInteger(at) || at < 1 || end === -1) {
    const done = completed(origin)
    return Either.left(new ForkError({ message: `goal ${oldId} has no completed step ${at} to fork at (${done === 0 ? "it completed none" : `steps 1 to ${done}`})` }))
  }
  const calls = (id: string) => (id === oldId || id.startsWith(`${oldId}:`) ? `${forkId}${id.slice(oldId.length)}` : id)
  const { parent: _parent, forkedFrom: _forkedFrom, instructions: oldInstructions, ...rest } = submitted
  const instructions = changes.instructions ?? oldInstructions
  const first: Event.Event = {
    ...rest,
    goalId: forkId,
    at: now,
    ...(instructions === undefined || instructions === "" ? {} : { instructions }),
    forkedFrom: { goalId: oldId, iteration: at }
  }
  const copied = origin.slice(1, end + 1).map((event): Event.Event => ("callId" in event ? { ...event, goalId: forkId, callId: calls(event.callId) } : { ...event, goalId: forkId }))
  return Either.right([first, ...copied])
}

/** A fork's id: derived from the old goal, the iteration and the time, like any goal's. */
export const forkId = (oldId: string, goal: string, at: number, now: number): string => Runner.deriveGoalId(`${goal}\n(fork of ${oldId} at ${at})`, now)

/** Make the fork of `goalId` at iteration `at` in the log: its events appended, nothing run. Returns its id. */
export const make = (goalId: string, at: number, changes: Changes = {}): Effect.Effect<string, ForkError | StateStore.StoreError, StateStore.StateStore> =>
  Effect.flatMap(StateStore.StateStore, (store) => Effect.flatMap(store.load(goalId), (origin) => makeOf(goalId, origin, at, changes)))

/** `make` of a log already loaded (`origin`, the events of `goalId`). */
export const makeOf = (goalId: string, origin: ReadonlyArray<Event.Event>, at: number, changes: Changes = {}): Effect.Effect<string, ForkError | StateStore.StoreError, StateStore.StateStore> =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    if (origin.length === 0) return yield* new ForkError({ message: `no goal with id ${goalId}` })
    const now = yield* Clock.currentTimeMillis
    const first = origin[0] as Event.Event
    const id = forkId(goalId, first._tag === "GoalSubmitted" ? first.goal : "", at, now)
    const log = yield* events(origin, at, id, now, changes)
    yield* store.append(id, 0, log).pipe(
      Effect.catchTag("@rx/kernel/AppendConflict", () => new ForkError({ message: `a goal with id ${id} exists already: fork again` }))
    )
    return id
  })

/** Where a goal was forked from, from its first event. */
export const origin = (events: ReadonlyArray<Event.Event>): Option.Option<{ readonly goalId: string; readonly iteration: number }> => {
  const first = events[0]
  return first?._tag === "GoalSubmitted" && first.forkedFrom !== undefined ? Option.some(first.forkedFrom) : Option.none()
}

