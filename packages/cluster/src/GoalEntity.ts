/**
 * A goal as a cluster Entity, keyed by its id. Its one message, `Drive`, is persisted: the cluster
 * stores it before delivering it, delivers it to whichever worker owns the goal's shard, and
 * delivers it again elsewhere when that worker dies before replying. The handler is
 * `Runner.resume`: rx's log is the only truth, so driving a goal twice, or one that has ended,
 * appends nothing it should not (an ended goal returns its result; a goal another runner holds
 * is `busy`).
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as Rpc from "@effect/rpc/Rpc"
import { Effect, Layer, Schedule, Schema } from "effect"
import { Goal, type LanguageModel, type StateStore } from "@rx/kernel"
import { Delegate } from "@rx/tools"
import * as Workspaces from "./Workspaces.js"

/** What driving a goal came to: it ended, it waits (suspended), or another runner has it, or rx refused it. */
export const Driven = Schema.Struct({
  status: Schema.Literal("terminated", "suspended", "busy", "refused"),
  /** The termination or suspension reason; the error's tag when busy or refused. */
  reason: Schema.String,
  detail: Schema.String
})
export type Driven = typeof Driven.Type

/** "Drive this goal": run it from its log until it ends or must wait. Persisted. */
export const Drive = Rpc.make("Drive", { success: Driven }).annotate(ClusterSchema.Persisted, true)

/** The goal Entity; its id is the goal's id. */
export const GoalEntity = Entity.make("rx/Goal", [Drive])

/**
 * How soon a drive that failed on the store (a lost connection) tries again: quickly at first,
 * then every 10 s, for as long as the worker owns the goal. The message stays unanswered meanwhile,
 * so a worker that dies retrying leaves it to the next owner.
 */
export const storeRetry = Schedule.exponential("200 millis", 2).pipe(Schedule.union(Schedule.spaced("10 seconds")))

/** What a worker drives goals with: the model, the log, and each goal's tools. */
export type Services = LanguageModel.LanguageModel | StateStore.StateStore | Workspaces.Workspaces

/**
 * Drive one goal with the services at hand: `Delegate.drive` with the tools `Workspaces` gives it
 * (a goal whose workspace is not on this worker is refused before anything runs), its outcome as
 * `Driven`.
 */
export const drive = (goalId: string): Effect.Effect<Driven, never, Services> =>
  Effect.gen(function*() {
    const state = yield* Goal.restore(goalId)
    if (state.seq === 0) return yield* new Goal.GoalNotFound({ goalId })
    const workspaces = yield* Workspaces.Workspaces
    const settings = state.options.settings
    // A goal offered `delegate` runs its sub-goals in this drive, on this worker (a sub-goal is a
    // goal of the same log: if this worker dies, the goal's next owner resumes it, and its sub-goal
    // from where it was), each with the tools of its folder of the volume.
    return yield* Delegate.drive(state, yield* workspaces.tools(goalId, settings), {
      workspace: settings?.workspace,
      workspaceTools: (folder) => Effect.mapError(workspaces.tools(goalId, { ...settings, workspace: folder }), (error) => error.message)
    })
  }).pipe(
    Effect.scoped,
    Effect.tapError((error) =>
      error._tag === "@rx/kernel/StoreError"
        ? Effect.logWarning(`goal ${goalId}: the store failed (${error.message}); driving it again`)
        : Effect.void
    ),
    Effect.retry({ schedule: storeRetry, while: (error) => error._tag === "@rx/kernel/StoreError" }),
    Effect.map((result): Driven => ({ status: result.status, reason: result.reason, detail: result.detail })),
    Effect.tapError((error) => error._tag === "@rx/cluster/WrongWorkspace" ? Effect.logError(error.message) : Effect.void),
    Effect.catchAll((error) =>
      Effect.succeed<Driven>({
        status: error._tag === "@rx/kernel/GoalBusy" ? "busy" : "refused",
        reason: error._tag,
        detail: error.message
      })
    )
  )

/**
 * The Entity's behaviour on a worker: each `Drive` resumes its goal with this worker's model and
 * store and the goal's tools (`Workspaces`), at most `concurrency` goals at once on this worker
 * (the handlers are built once per goal, so the permits are made here, once per worker). Messages
 * to one goal are handled one at a time.
 */
export const layer = (concurrency: number) =>
  Layer.unwrapEffect(Effect.map(Effect.makeSemaphore(concurrency), (permits) =>
    GoalEntity.toLayer(
      Effect.gen(function*() {
        const context = yield* Effect.context<Services>()
        return GoalEntity.of({
          Drive: (request) => permits.withPermits(1)(Effect.provide(drive(request.address.entityId), context))
        })
      })
    )))
