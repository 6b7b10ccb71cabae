/** The goals of a log on this machine (`Goals.layerLocal`). */
import type { FileSystem, Path } from "@effect/platform"
import { Continuation, Control, Goal, type GoalSummary, StateStore } from "@rx/kernel"
import * as View from "@rx/server/View"
import { Effect, Layer, Option, Schedule, Stream } from "effect"
import * as Log from "../Log.js"
import type * as Settings from "../Settings.js"
import { UsageError } from "../Settings.js"
import type { Failure, Followed, Service } from "./service.js"


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
    const listed = (query: GoalSummary.Query) =>
      Effect.flatMap(StateStore.StateStore, (store) => Effect.flatMap(store.goals(query), withRunners(store))).pipe(withLog("read"))
    const logExists = Log.exists(db).pipe(Effect.provide(context))
    const load = (goalId: string) =>
      Effect.gen(function*() {
        const events = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))
        return events.length === 0 ? yield* noGoal(goalId) : events
      })

    const runs = Effect.promise(() => import("./runs.js"))
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
      list: Effect.flatMap(logExists, (exists) => exists ? listed({}) : Effect.succeed([])),
      view: (goalId) =>
        View.fromStore(goalId, (summary) =>
          summary.status === "terminated" ? Effect.succeed(false) : Effect.flatMap(StateStore.StateStore, (store) => Effect.map(store.runner(summary.goalId), Option.isSome))).pipe(
            Effect.flatMap(Option.match({ onNone: () => noGoal(goalId), onSome: Effect.succeed })),
            withLog("read")
          ),
      summary: (goalId) =>
        Effect.gen(function*() {
          const store = yield* StateStore.StateStore
          const summary = yield* store.goal(goalId)
          if (Option.isNone(summary)) return yield* noGoal(goalId)
          const [listed] = yield* withRunners(store)([summary.value])
          return listed ?? { ...summary.value, running: false }
        }).pipe(withLog("read")),
      continuedBy: (goalId) => Continuation.continuedBy(goalId).pipe(withLog("read")),
      events: (goalId) => load(goalId).pipe(withLog("read")),
      follow,
      cancel: (goalId, reason) => Control.cancel(goalId, reason).pipe(withLog("write")),
      say: (goalId, text, by) =>
        Control.say(goalId, { text, by }).pipe(
          Effect.catchTags({
            "@rx/kernel/GoalNotFound": () => noGoal(goalId),
            "@rx/kernel/MessageRefused": (error) => new UsageError({ message: error.message })
          }),
          Effect.asVoid,
          withLog("write")
        ),
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
            call: awaited === null ? null : { tool: awaited.tool, input: awaited.input, iteration: state.iteration },
            ...(state.cancelRequested === null ? {} : { cancelled: state.cancelRequested })
          }
        }).pipe(withLog("write"))
    }
  })

