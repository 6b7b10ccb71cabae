/**
 * The goals of a cluster's Postgres log: loaded only by `--cluster`.
 */
import type { FileSystem, Path } from "@effect/platform"
import { Goal, Options as RunOptions, StateStore } from "@rx/kernel"
import { Builtins } from "@rx/tools"
import { Context, Effect, Layer, Option } from "effect"
import { makeLocal } from "./local.js"
import { type Hooks, observed, type Service } from "./service.js"
import * as Log from "../Log.js"
import * as Settings from "../Settings.js"
import { defaultFailover, UsageError } from "../Settings.js"
import * as Setup from "../Setup.js"
import * as Postgres from "./postgres.js"

/**
 * The goals of a cluster's Postgres log (`rx worker`s run them): `run` and `resume` record the
 * goal and hand it to the workers (a persisted message, so it survives any process), then follow
 * its log to its end or until it waits; the rest reads and writes the log as `makeLocal` does.
 */
export const makeCluster = (db: Settings.Database, failover: Option.Option<number>) =>
  Effect.gen(function*() {
    if (!db.postgres) {
      return yield* new UsageError({ message: "--cluster needs the cluster's Postgres log: --db postgres://USER:PASSWORD@HOST/DB (or RX_DB), the one its workers use" })
    }
    const seconds = Option.getOrElse(failover, () => defaultFailover)
    const { Workers, Workspaces } = yield* Postgres.cluster
    const local = yield* makeLocal(db)
    const context = yield* Effect.context<FileSystem.FileSystem | Path.Path>()
    const client = Layer.mapError(Workers.layerClient({ url: db.file, failoverMs: seconds * 1_000 }), Postgres.refused)
    /** Hand the goal to the workers, then observe its events from `from` until it ends or suspends. */
    const driven = (goalId: string, from: number, hooks: Hooks) =>
      Effect.gen(function*() {
        yield* Workers.drive(goalId)
        const store = yield* StateStore.StateStore
        return yield* observed(goalId, store.changes(goalId, 0), from, hooks, "the log ended before the goal did")
      }).pipe(Effect.provide(client))
    const service: Service = {
      ...local,
      run: (request, hooks) =>
        Effect.scoped(Effect.gen(function*() {
          yield* Settings.noMcp(request, "rx run --cluster")
          yield* Settings.refuseOthers(request.given, Settings.runKeys.filter((key) => !Settings.modelKeys.includes(key)), "rx run --cluster takes the limits, the tools and their settings, the approval policy and the folder", "--cluster")
          // The goal runs on a worker that has this folder's volume mounted: it must be on one.
          const onVolume = (workspace: string) =>
            Effect.flatMap(Effect.mapError(Workspaces.find(workspace), Postgres.refused), (found) =>
              found === undefined
                ? new UsageError({ message: `${workspace} is on no rx volume: run the goal in a folder of the cluster's shared workspace root (rx worker --workspace)` })
                : Effect.succeed(Postgres.withFile(Workspaces, found)))
          const { values: v, workspace, tools, volume } = yield* Setup.prepare(db, request.given, Settings.runKeys, { workers: true, volume: onVolume })
          // The tools the goal is offered: the built-ins as they can run here (the workers run them).
          const registry = yield* Layer.build(Builtins.layer(tools)).pipe(Effect.mapError((error) => new UsageError({ message: error.message })))
          const offered = Context.get(registry, Builtins.Availability).tools.map((tool) => tool.spec.name)
          const approval = yield* Settings.approval(v.ask ?? [], v.deny ?? [], Setup.builtinNames, offered)
          const settings: Settings.Recorded = { ...Setup.recordedTools(v, workspace), volume: volume.id, ...(offered.length === Setup.builtinNames.length ? {} : { tools: offered }) }
          const options: RunOptions.Input = { ...Setup.runOptions(v), ...(Object.keys(approval).length === 0 ? {} : { approval }), settings }
          const submit = yield* Setup.submission(db, request, options, Setup.instructions(v, workspace))
          const goalId = yield* submit().pipe(
            Effect.provide(Layer.succeedContext(registry)),
            Effect.provide(client)
          )
          return yield* driven(goalId, 0, hooks)
        })).pipe(Effect.provide(context)),
      resume: (request, hooks) =>
        Effect.gen(function*() {
          yield* Settings.noMcp(request, "rx resume --cluster")
          yield* Settings.refuseOthers(request.given, [], "the cluster's workers run the goal with their own model and tools", "--cluster")
          const state = yield* Goal.restore(request.goalId).pipe(Effect.provide(client))
          if (state.seq === 0) return yield* Log.noGoal(request.goalId, db)
          if (state.terminated !== null) return Goal.result(state)
          return yield* driven(request.goalId, state.seq, hooks)
        })
    }
    return service
  })

