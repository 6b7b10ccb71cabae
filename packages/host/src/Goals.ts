/**
 * The goals a command works on, wherever they are: in a log on this machine (`layerLocal`), at an
 * `rx serve` (`layerHttp`, through `@rx/server`'s typed `Client`), or run by a cluster's workers
 * (`layerCluster`). Each command is written once against this service; `layer` picks the place
 * the settings name (`--server` or `RX_SERVER`, else `--cluster`, else the log of `--db`, `RX_DB`
 * or the default). What only some commands need (the HTTP client, the cluster, the model and tool
 * Layers of a run) is loaded when used.
 */
import type { FileSystem, Path } from "@effect/platform"
import { Control, type Event, Goal, type GoalSummary, type Options as RunOptions, type Runner, State, StateStore } from "@rx/kernel"
import type * as McpFlags from "@rx/mcp/Flags"
import type { Api } from "@rx/server"
import { Context, Effect, Layer, Option, Schedule, Stream } from "effect"
import * as Log from "./Log.js"
import * as Settings from "./Settings.js"
import { UsageError } from "./Settings.js"

/** Where the goals are: a log on this machine, or the rx serve at a URL. */
export type Where = { readonly _tag: "Log"; readonly db: Settings.Database } | { readonly _tag: "Server"; readonly url: string }

/** Why a goals operation failed: each says so in one line. */
export type Failure = UsageError | Runner.RunError | Goal.GoalNotFound

/** A resume's start, before its first step: the goal as it stands, what it goes on with, and the settings changes it recorded. */
export interface Starting {
  readonly state: State.State
  readonly settings: Settings.Recorded
  /** The options before this resume recorded its changes, and the `OptionsChanged` it recorded. */
  readonly before: RunOptions.Options
  readonly changed: ReadonlyArray<Event.Of<"OptionsChanged">>
}

/** What a run calls: each committed event, a person's decision where one is at hand, a resume's start. */
export interface Hooks {
  readonly observe: Runner.Observer
  readonly approve?: Runner.Approver | undefined
  readonly starting?: (start: Starting) => Effect.Effect<void>
}

/** A new goal, as the command line gives it. */
export interface RunRequest extends McpFlags.McpFlags {
  readonly goal: Option.Option<string>
  readonly goalFile: Option.Option<string>
  readonly given: Settings.Given
}

/** A goal to go on with, and the settings a resume changes. */
export interface ResumeRequest {
  readonly goalId: string
  readonly given: Settings.Given
  readonly mcpEnv: ReadonlyArray<string>
}

/** A decision on the call a goal waits on (or `callId`). */
export interface Decision {
  readonly goalId: string
  readonly approve: boolean
  readonly by: string
  readonly reason: string
  readonly callId: Option.Option<string>
}

/** The call decided on, as it was requested (if the goal still said so). */
export interface Decided {
  readonly callId: string
  readonly call: { readonly tool: string; readonly input: unknown; readonly iteration: number } | null
}

/**
 * A goal as a listing shows it: a log's summary with whether a live runner holds its lease now
 * (`running`), or a server's view (whose `activity` says so). `GoalSummary.phase` of either says
 * whether an open goal runs, waits, or is idle.
 */
export type Listed = (GoalSummary.GoalSummary & { readonly running: boolean }) | Api.Goal

/** An event of a followed goal, or the note that no runner holds it (said once a time). */
export type Followed = { readonly _tag: "Event"; readonly event: Event.Event } | { readonly _tag: "Unattended" }

export interface Service {
  readonly where: Where
  /** Submit a goal and run it to its end or until it must wait. */
  readonly run: (request: RunRequest, hooks: Hooks) => Effect.Effect<Goal.Result, Failure>
  /** Go on with an open goal. */
  readonly resume: (request: ResumeRequest, hooks: Hooks) => Effect.Effect<Goal.Result, Failure>
  /** Every goal, newest first: the log's summaries, or the server's views of them. */
  readonly list: Effect.Effect<ReadonlyArray<Listed>, Failure>
  /** The sub-goals a goal delegated, newest first. */
  readonly children: (goalId: string) => Effect.Effect<ReadonlyArray<Listed>, Failure>
  /** One goal's summary (or view); a goal that does not exist is an error. */
  readonly summary: (goalId: string) => Effect.Effect<Listed, Failure>
  /** A goal's events as far as they are recorded; a goal that does not exist is an error. */
  readonly events: (goalId: string) => Effect.Effect<ReadonlyArray<Event.Event>, Failure>
  /** A goal's events as they are appended, until it terminates (or, without `wait`, nothing runs it). */
  readonly follow: (goalId: string, wait: boolean) => Stream.Stream<Followed, Failure>
  /** Ask a goal to stop within one step; `reason` is recorded (a server records its own). */
  readonly cancel: (goalId: string, reason: string) => Effect.Effect<"requested" | "already_terminated", Failure>
  /** Record a decision; it runs nothing. */
  readonly decide: (decision: Decision) => Effect.Effect<Decided, Failure>
}

export class Goals extends Context.Tag("@rx/host/Goals")<Goals, Service>() {}

/**
 * Follow a goal run elsewhere (by a server, by the workers): its events from the start, each
 * from `from` on observed, until it ends or suspends; then how it stands. `ended` says why, when
 * the events end first.
 */
export const observed = <E, R>(goalId: string, events: Stream.Stream<Event.Event, E, R>, from: number, hooks: Hooks, ended: string) =>
  Effect.gen(function*() {
    let state = State.empty(goalId)
    yield* events.pipe(
      Stream.takeUntil((event) => event._tag === "Terminated" || (event._tag === "Suspended" && event.seq >= from)),
      Stream.runForEach((event) =>
        Effect.suspend(() => {
          state = State.reduce(state, event)
          return event.seq >= from ? hooks.observe(event) : Effect.void
        })
      )
    )
    return Goal.result(state, { reason: "shutdown", detail: ended })
  })

// ---------------------------------------------------------------------------------------------
// A log on this machine
// ---------------------------------------------------------------------------------------------

/** Each summary with whether a live runner holds the goal now (its lease): read for open goals only. */
const withRunners = (store: StateStore.StateStore["Type"]) => (summaries: ReadonlyArray<GoalSummary.GoalSummary>) =>
  Effect.forEach(summaries, (summary) =>
    summary.status === "terminated"
      ? Effect.succeed({ ...summary, running: false })
      : Effect.map(store.runner(summary.goalId), (holder) => ({ ...summary, running: Option.isSome(holder) })))

/** The goals of the log at `db`. Each operation opens the log as it needs it (only `run` creates one). */
export const makeLocal = (db: Settings.Database) =>
  Effect.map(Effect.context<FileSystem.FileSystem | Path.Path>(), (context): Service => {
    const withLog = (access: Log.Access) => <A, E, R>(body: Effect.Effect<A, E, R>) =>
      body.pipe(Effect.provide(Log.layer(db, access)), Effect.provide(context))
    const noGoal = (goalId: string) => Log.noGoal(goalId, db)
    const logExists = Log.exists(db).pipe(Effect.provide(context))
    const load = (goalId: string) =>
      Effect.gen(function*() {
        const events = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))
        return events.length === 0 ? yield* noGoal(goalId) : events
      })

    const runs = Effect.promise(() => import("./internal/runs.js"))
    /** How often a follower checks that a runner still holds the goal. */
    const watchEvery = "1 second"

    const follow = (goalId: string, wait: boolean): Stream.Stream<Followed, Failure> =>
      Stream.unwrap(Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        if (Option.isNone(yield* store.goal(goalId))) return yield* noGoal(goalId)
        // A watch on the goal's runner: twice in a row no runner holds an open goal (and no event
        // came between), and it is said once; without `wait`, following stops there.
        let quiet = 0
        let told = false
        const watch = Stream.repeatEffectWithSchedule(store.runner(goalId), Schedule.spaced(watchEvery)).pipe(
          Stream.filterMap((holder) => {
            quiet = Option.isNone(holder) ? quiet + 1 : 0
            if (quiet < 2) told = false
            if (quiet < 2 || told) return Option.none()
            told = true
            return Option.some<Followed>({ _tag: "Unattended" })
          })
        )
        const events = Stream.map(store.changes(goalId, 0), (event): Followed => {
          quiet = 0
          return { _tag: "Event", event }
        })
        return Stream.merge(events, watch).pipe(
          Stream.takeUntil((item) => (item._tag === "Event" ? item.event._tag === "Terminated" : !wait))
        )
      })).pipe(Stream.provideLayer(Layer.provide(Log.layer(db, "read"), Layer.succeedContext(context))))

    return {
      where: { _tag: "Log", db },
      run: (request, hooks) => Effect.flatMap(runs, (m) => m.run(db, request, hooks)).pipe(Effect.provide(context)),
      resume: (request, hooks) => Effect.flatMap(runs, (m) => m.resume(db, request, hooks)).pipe(Effect.provide(context)),
      // Before any run there is no log: no goals, rather than an error (the caller says where none is).
      list: Effect.flatMap(logExists, (exists) =>
        exists
          ? Effect.flatMap(StateStore.StateStore, (store) => Effect.flatMap(store.goals(), withRunners(store))).pipe(withLog("read"))
          : Effect.succeed([])),
      children: (goalId) =>
        Effect.flatMap(StateStore.StateStore, (store) => Effect.flatMap(store.goals({ parent: goalId }), withRunners(store))).pipe(withLog("read")),
      summary: (goalId) =>
        Effect.gen(function*() {
          const store = yield* StateStore.StateStore
          const summary = yield* store.goal(goalId)
          if (Option.isNone(summary)) return yield* noGoal(goalId)
          const [listed] = yield* withRunners(store)([summary.value])
          return listed ?? { ...summary.value, running: false }
        }).pipe(withLog("read")),
      events: (goalId) => load(goalId).pipe(withLog("read")),
      follow,
      cancel: (goalId, reason) => Control.cancel(goalId, reason).pipe(withLog("write")),
      decide: (d) =>
        Effect.gen(function*() {
          const callId = Option.getOrUndefined(d.callId)
          const outcome = yield* (d.approve ? Control.approve(d.goalId, d.by, callId) : Control.deny(d.goalId, d.by, d.reason, callId)).pipe(
            Effect.catchTags({
              "@rx/kernel/GoalNotFound": () => noGoal(d.goalId),
              "@rx/kernel/NothingToDecide": (error) =>
                Effect.flatMap(Goal.restore(d.goalId), (state) => {
                  const child = state.suspended?.child
                  return new UsageError({
                    message: child === undefined
                      ? `${error.message} (rx inspect ${d.goalId} shows its approvals)`
                      : `goal ${d.goalId} waits on its sub-goal ${child}, not on a call of its own: rx ${d.approve ? "approve" : "deny"} ${child} decides it, then rx resume ${d.goalId} goes on with both`
                  })
                })
            })
          )
          const state = yield* Goal.restore(d.goalId)
          if (outcome === "already_terminated") {
            return yield* new UsageError({ message: `goal ${d.goalId} has terminated (${state.terminated?.reason ?? "?"}); there is nothing to decide` })
          }
          const awaited = state.awaiting
          return {
            callId: awaited?.callId ?? callId ?? "?",
            call: awaited === null ? null : { tool: awaited.tool, input: awaited.input, iteration: state.iteration }
          }
        }).pipe(withLog("write"))
    }
  })

// ---------------------------------------------------------------------------------------------
// An rx serve
// ---------------------------------------------------------------------------------------------

/** The server the settings name: `--server`, else `RX_SERVER`; none for a local log. */
export const serverOf = (given: Settings.Given) =>
  Effect.gen(function*() {
    const flag = (yield* Settings.fromFlags({ server: given.server ?? Option.none() })).server
    const found = flag ?? (yield* Settings.fromEnv(["server"])).server
    return Option.fromNullable(found?.value)
  })

/** How a command reaches its goals besides its settings: through a cluster's workers (`--cluster`), with the failover time they use. */
export interface Reach {
  readonly cluster?: boolean
  readonly failover?: Option.Option<string>
}

/** The goals at the server the settings name, else those a cluster's workers run, else in the log they name. */
export const make = (given: Settings.Given, reach: Reach = {}) =>
  reach.cluster !== true && reach.failover !== undefined && Option.isSome(reach.failover)
    ? new UsageError({ message: "--failover applies with --cluster" })
    : Effect.flatMap(
    serverOf(given),
    Option.match({
      onNone: () =>
        Effect.flatMap(Log.database(Settings.dbFlag(given)), (db) =>
          reach.cluster === true ? makeCluster(db, reach.failover ?? Option.none()) : makeLocal(db)),
      onSome: (url) => reach.cluster === true ? new UsageError({ message: "--cluster and --server name two places: give one" }) : makeHttp(url, given)
    })
    )

export const layer = (given: Settings.Given, reach: Reach = {}) => Layer.effect(Goals, make(given, reach))
export const layerLocal = (db: Settings.Database) => Layer.effect(Goals, makeLocal(db))
export const layerHttp = (url: string, given: Settings.Given = {}) => Layer.effect(Goals, makeHttp(url, given))
export const layerCluster = (db: Settings.Database, failover: Option.Option<string> = Option.none()) => Layer.effect(Goals, makeCluster(db, failover))

/** The goals of the rx serve at `url`, with the token the settings name (`RX_TOKEN`, or the token file of a server on this machine). */
export const makeHttp = (url: string, given: Settings.Given) => Effect.flatMap(Effect.promise(() => import("./internal/http.js")), (m) => m.makeHttp(url, given))

/**
 * The goals of a cluster's Postgres log (`rx worker`s run them): `run` and `resume` record the
 * goal and hand it to the workers, then follow its log; the rest is `makeLocal`'s.
 */
export const makeCluster = (db: Settings.Database, failover: Option.Option<string>) =>
  Effect.flatMap(Effect.promise(() => import("./internal/cluster.js")), (m) => m.makeCluster(db, failover))
