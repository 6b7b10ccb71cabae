/**
 * The append-only log of every goal. Appends are optimistic: the caller says which seq it
 * expects next, and a stale expectation is an `AppendConflict`, never a silent overwrite.
 */
import { Chunk, Context, Effect, Layer, Option, Queue, Schema, type Scope, Stream } from "effect"
import * as Event from "./Event.js"
import * as GoalSummary from "./GoalSummary.js"
import type * as State from "./State.js"
import { acquirePlain } from "./internal/release.js"
import * as Watchers from "./internal/watchers.js"

/** Someone appended first: the log already has `actualSeq` events, not `expectedSeq`. */
export class AppendConflict extends Schema.TaggedError<AppendConflict>()("@rx/kernel/AppendConflict", {
  goalId: Schema.String,
  expectedSeq: Schema.Number,
  actualSeq: Schema.Number
}) {
  override get message() {
    return `goal ${this.goalId}: expected to append at seq ${this.expectedSeq}, but the log is at ${this.actualSeq}`
  }
}

/** The store failed or holds something it cannot read; `seq` names the event when known. */
export class StoreError extends Schema.TaggedError<StoreError>()("@rx/kernel/StoreError", {
  message: Schema.String,
  goalId: Schema.optional(Schema.String),
  seq: Schema.optional(Schema.Number)
}) {}

/** Another runner holds the goal's lease: it is being run elsewhere. `holder` says by whom, if known. */
export class LeaseHeld extends Schema.TaggedError<LeaseHeld>()("@rx/kernel/LeaseHeld", {
  goalId: Schema.String,
  holder: Schema.String
}) {
  override get message() {
    return `goal ${this.goalId} is being run elsewhere (${this.holder})`
  }
}

/** A folded State saved at `seq` events, to shorten the fold on resume. */
export interface Snapshot {
  readonly seq: number
  readonly state: State.State
}

export interface Service {
  /**
   * Append `events` (seq `expectedSeq`, `expectedSeq + 1`, ...) atomically. `state` is the
   * goal's State after the batch, as the runner folded it: a store that keeps snapshots may
   * save it (stores never fold events themselves); appends from outside the runner give none.
   */
  readonly append: (
    goalId: string,
    expectedSeq: number,
    events: ReadonlyArray<Event.Event>,
    state?: State.State
  ) => Effect.Effect<void, AppendConflict | StoreError>
  /** The goal's events from `fromSeq` (default 0), in order; none for an unknown goal. */
  readonly load: (goalId: string, fromSeq?: number) => Effect.Effect<ReadonlyArray<Event.Event>, StoreError>
  /** One goal's summary. */
  readonly goal: (goalId: string) => Effect.Effect<Option.Option<GoalSummary.GoalSummary>, StoreError>
  /** Goals, newest first (with `parent`, only that goal's sub-goals; with `forkedFrom`, only its forks). */
  readonly goals: (query?: GoalSummary.Query) => Effect.Effect<ReadonlyArray<GoalSummary.GoalSummary>, StoreError>
  /**
   * The goal's events from `fromSeq`: those already stored, then each one as it is appended,
   * by this process or another. With `tags`, only events of those kinds.
   */
  readonly changes: (
    goalId: string,
    fromSeq: number,
    tags?: ReadonlyArray<Event.Event["_tag"]>
  ) => Stream.Stream<Event.Event, StoreError>
  /**
   * Optional: the goal's first event of one of the `tags` kinds at or after `fromSeq`, stored or
   * else the next one appended (it waits for it). Use it through `StateStore.first`, which falls
   * back to `changes` for a store without it: a Stream costs a few hundred µs to start, and a
   * runner waits this way once per run (for a cancel request).
   */
  readonly first?: (
    goalId: string,
    fromSeq: number,
    tags: ReadonlyArray<Event.Event["_tag"]>
  ) => Effect.Effect<Event.Event, StoreError>
  /**
   * Optional: follow the goal from `fromSeq` while the scope lasts. Each run of the Effect it
   * gives returns the next events (of `tags` kinds, all without), at least one, waiting for them:
   * `changes` pulled, without a Stream's cost to start and per chunk (a server follows a goal per
   * client). Use it through `StateStore.follow`, which falls back to `changes`.
   */
  readonly follow?: (
    goalId: string,
    fromSeq: number,
    tags?: ReadonlyArray<Event.Event["_tag"]>
  ) => Effect.Effect<Effect.Effect<Chunk.Chunk<Event.Event>, StoreError>, StoreError, Scope.Scope>
  /** The latest snapshot of the goal's State, if the store keeps them. */
  readonly snapshot: (goalId: string) => Effect.Effect<Option.Option<Snapshot>, StoreError>
  /**
   * The right to run a goal, held until the scope closes. Only one runner at a time, in any
   * process, holds it; a holder that died (a crashed process) no longer counts.
   */
  readonly lease: (goalId: string) => Effect.Effect<void, LeaseHeld | StoreError, Scope.Scope>
  /**
   * Who runs the goal now: the holder of its lease, described, while a live one holds it;
   * none when no runner does (never run, ended, or its process died or stopped renewing the
   * lease). Readers use it to tell a goal that is running from one nobody will move on; it only
   * reads, so a store opened read-only answers it too.
   */
  readonly runner: (goalId: string) => Effect.Effect<Option.Option<string>, StoreError>
}

export class StateStore extends Context.Tag("@rx/kernel/StateStore")<StateStore, Service>() {}

/**
 * The reading side of a store that can follow a goal: its `follow`, `changes` (the follow as a
 * Stream) and `first` (the head of the follow's first pull).
 */
export const followedBy = (follow: NonNullable<Service["follow"]>): Pick<Service, "changes"> & Required<Pick<Service, "follow" | "first">> => ({
  changes: (goalId, fromSeq, tags) => Stream.unwrapScoped(Effect.map(follow(goalId, fromSeq, tags), Stream.repeatEffectChunk)),
  follow,
  first: (goalId, fromSeq, tags) => Effect.scoped(Effect.flatMap(follow(goalId, fromSeq, tags), (next) => Effect.map(next, Chunk.unsafeHead)))
})

/**
 * The goal's first event of one of the `tags` kinds at or after `fromSeq`, waiting for it: the
 * store's own `first` when it has one, otherwise the head of its `changes`.
 */
export const first = (
  store: Service,
  goalId: string,
  fromSeq: number,
  tags: ReadonlyArray<Event.Event["_tag"]>
): Effect.Effect<Event.Event, StoreError> =>
  store.first !== undefined
    ? store.first(goalId, fromSeq, tags)
    : Effect.flatMap(Stream.runHead(store.changes(goalId, fromSeq, tags)), (head) =>
      Option.isSome(head)
        ? Effect.succeed(head.value)
        : Effect.fail(new StoreError({ message: `goal ${goalId}: the store's changes stream ended, which a log's never does`, goalId })))

/**
 * Follow the goal from `fromSeq` while the scope lasts: each run of the Effect returned gives the
 * next events (of `tags` kinds, all without), at least one, waiting for them. The store's own
 * `follow` when it has one, otherwise its `changes`, pulled.
 */
export const follow = (
  store: Service,
  goalId: string,
  fromSeq: number,
  tags?: ReadonlyArray<Event.Event["_tag"]>
): Effect.Effect<Effect.Effect<Chunk.Chunk<Event.Event>, StoreError>, StoreError, Scope.Scope> =>
  store.follow !== undefined
    ? store.follow(goalId, fromSeq, tags)
    : Effect.map(Stream.toPull(store.changes(goalId, fromSeq, tags)), (pull) =>
      Effect.mapError(
        pull,
        Option.getOrElse(() => new StoreError({ message: `goal ${goalId}: the store's changes stream ended, which a log's never does`, goalId }))
      ))

/** Check that a batch continues the log at `expectedSeq` for `goalId`. */
export const validateBatch = (
  goalId: string,
  expectedSeq: number,
  events: ReadonlyArray<Event.Event>
): Option.Option<StoreError> => {
  for (let i = 0; i < events.length; i++) {
    const event = events[i] as Event.Event
    if (event.goalId !== goalId || event.seq !== expectedSeq + i) {
      return Option.some(
        new StoreError({
          message: `batch for goal ${goalId} at seq ${expectedSeq} holds ${event._tag} of goal ${event.goalId} with seq ${event.seq}; seq must be ${expectedSeq + i}`,
          goalId,
          seq: expectedSeq + i
        })
      )
    }
  }
  if (expectedSeq === 0 && events[0]?._tag !== "GoalSubmitted") {
    return Option.some(new StoreError({ message: `goal ${goalId}: the first event must be GoalSubmitted`, goalId, seq: 0 }))
  }
  return Option.none()
}

/** A store in memory: for tests, replay and embedding; nothing survives the process. */
export const makeMemory = Effect.gen(function*() {
  const logs = new Map<string, Array<Event.Event>>()
  const summaries = new Map<string, GoalSummary.GoalSummary>()
  const leased = new Set<string>()
  /** Open `changes` streams, by goal; each append offers those of its goal the events they asked for. */
  const watchers = Watchers.make<{ readonly wants: (e: Event.Event) => boolean; readonly queue: Queue.Queue<Event.Event> }>()
  /**
   * Watch the goal for events of `tags` kinds (all without) and read what is stored from
   * `fromSeq`, in one step: no append falls between the two. Returns the stored ones, and the
   * queue that gets each one appended after them (`later` keeps those from `fromSeq`).
   */
  const watch = (goalId: string, fromSeq: number, tags: ReadonlyArray<string> | undefined) =>
    Effect.flatMap(Queue.unbounded<Event.Event>(), (queue) => {
      const wants = (e: Event.Event) => tags === undefined || tags.includes(e._tag)
      const watcher = { wants, queue }
      return acquirePlain(
        Effect.sync(() => {
          watchers.add(goalId, watcher)
          return { stored: (logs.get(goalId) ?? []).slice(fromSeq).filter(wants), queue, later: (e: Event.Event) => e.seq >= fromSeq }
        }),
        () => Effect.zipRight(Effect.sync(() => watchers.remove(goalId, watcher)), Queue.shutdown(queue))
      )
    })

  return StateStore.of({
    append: (goalId, expectedSeq, events) =>
      Effect.suspend((): Effect.Effect<void, AppendConflict | StoreError> => {
        const log = logs.get(goalId) ?? []
        if (log.length !== expectedSeq) {
          return Effect.fail(new AppendConflict({ goalId, expectedSeq, actualSeq: log.length }))
        }
        const invalid = validateBatch(goalId, expectedSeq, events)
        if (Option.isSome(invalid)) return Effect.fail(invalid.value)
        if (events.length === 0) return Effect.void
        for (const event of events) log.push(event)
        logs.set(goalId, log)
        const summary = GoalSummary.updateAll(summaries.get(goalId), events)
        if (summary !== undefined) summaries.set(goalId, summary)
        for (const watcher of watchers.of(goalId)) {
          for (const event of events) if (watcher.wants(event)) Queue.unsafeOffer(watcher.queue, event)
        }
        return Effect.void
      }),
    load: (goalId, fromSeq = 0) => Effect.sync(() => (logs.get(goalId) ?? []).slice(fromSeq)),
    goal: (goalId) => Effect.sync(() => Option.fromNullable(summaries.get(goalId))),
    goals: (query = {}) =>
      Effect.sync(() => {
        const all = [...summaries.values()]
          .filter((s) => (query.status === undefined || s.status === query.status) && (query.parent === undefined || s.parent === query.parent) &&
            (query.forkedFrom === undefined || s.forkedFrom?.goalId === query.forkedFrom))
          .sort((a, b) => b.submittedAt - a.submittedAt || (a.goalId < b.goalId ? 1 : -1))
        return query.limit === undefined ? all : all.slice(0, query.limit)
      }),
    changes: (goalId, fromSeq, tags) =>
      Stream.unwrapScoped(Effect.map(watch(goalId, fromSeq, tags), ({ later, queue, stored }) =>
        Stream.concat(Stream.fromIterable(stored), Stream.filter(Stream.fromQueue(queue), later)))),
    follow: (goalId, fromSeq, tags) =>
      Effect.map(watch(goalId, fromSeq, tags), ({ later, queue, stored }) => {
        let held = stored
        const next: Effect.Effect<Chunk.Chunk<Event.Event>> = Effect.suspend(() => {
          if (held.length > 0) {
            const events = Chunk.unsafeFromArray(held)
            held = []
            return Effect.succeed(events)
          }
          return Effect.flatMap(Queue.takeBetween(queue, 1, Number.POSITIVE_INFINITY), (taken) => {
            const events = Chunk.filter(taken, later)
            return Chunk.isEmpty(events) ? next : Effect.succeed(events)
          })
        })
        return next
      }),
    first: (goalId, fromSeq, tags) =>
      Effect.scoped(Effect.flatMap(watch(goalId, fromSeq, tags), ({ later, queue, stored }) =>
        stored.length > 0 ? Effect.succeed(stored[0] as Event.Event) : Effect.repeat(Queue.take(queue), { until: later }))),
    snapshot: () => Effect.succeed(Option.none()),
    lease: (goalId) =>
      acquirePlain(
        Effect.suspend(() => {
          if (leased.has(goalId)) return Effect.fail(new LeaseHeld({ goalId, holder: "another runner in this process" }))
          leased.add(goalId)
          return Effect.void
        }),
        () => Effect.sync(() => leased.delete(goalId))
      ),
    runner: (goalId) => Effect.sync(() => (leased.has(goalId) ? Option.some("a runner in this process") : Option.none()))
  })
})

/** The memory store as a Layer; each build is a new, empty store. */
export const layerMemory: Layer.Layer<StateStore> = Layer.effect(StateStore, makeMemory)
