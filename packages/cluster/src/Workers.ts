/**
 * Goals spread over worker processes. A worker is a socket runner of @effect/cluster whose message
 * and runner storage (`cluster_*` tables, shard locks as Postgres advisory locks) live in the
 * Postgres database of the rx log; it drives the goals of the shards it owns. Submitting appends
 * `GoalSubmitted` first, then sends the goal's persisted `Drive` message: a duplicate send is
 * harmless, since resuming an ended goal appends nothing. Cancel and approvals stay rx events.
 */
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import { Sharding } from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import type { SocketServerError } from "@effect/platform/SocketServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Cause, Duration, Effect, ExecutionStrategy, Exit, Layer, Option, Redacted, Schedule, Scope } from "effect"
import { type LanguageModel, Runner, StateStore, type ToolRegistry } from "@rx/kernel"
import { Config as PgConfig, PgStore } from "@rx/store-pg"
import * as Config from "./Config.js"
import * as GoalEntity from "./GoalEntity.js"
import type * as Workspaces from "./Workspaces.js"

/**
 * Record a new goal (`GoalSubmitted`, through `Runner.submit`), then send its `Drive` message
 * without waiting for a reply: the worker owning the goal's shard runs it. Returns the goal's id.
 * When the message cannot be stored the goal is recorded all the same; `drive` sends it again.
 */
export const submit = (
  submission: Runner.Submission
): Effect.Effect<string, Runner.RunError, ToolRegistry.ToolRegistry | StateStore.StateStore | Sharding> =>
  Effect.tap(Runner.submit(submission), drive)

/**
 * Send a goal's persisted `Drive` message (fire and forget): to run a goal again after it was
 * suspended (an approval decided, a model back), or one whose message was lost. Harmless when the
 * goal is running (messages to one goal wait their turn) or ended (nothing is appended).
 */
export const drive = (goalId: string): Effect.Effect<void, StateStore.StoreError, Sharding> =>
  Effect.flatMap(GoalEntity.GoalEntity.client, (client) => client(goalId).Drive(undefined, { discard: true })).pipe(
    Effect.catchAll((error) =>
      new StateStore.StoreError({
        message: `goal ${goalId} is recorded, but its Drive message could not be stored (${whyNot(error)}): send it again with Workers.drive`,
        goalId
      })
    )
  )

/** Why the cluster refused a message: its error's kind, and what caused it (a database error's message, with any password hidden). */
const whyNot = (error: { readonly _tag: string; readonly cause?: unknown }): string => {
  const cause = error.cause instanceof Error ? error.cause.message : error.cause === undefined ? "" : String(error.cause)
  return cause === "" ? error._tag : `${error._tag}: ${PgConfig.redact(cause)}`
}

/** The cluster's settings from ours; every field is set here, nothing is read from the environment. */
const shardingConfig = (
  config: Config.ClientConfig,
  runner: Option.Option<{ host: string; port: number; listenHost?: string | undefined; drainMs: number }>
) =>
  ShardingConfig.layer({
    ...ShardingConfig.defaults,
    runnerAddress: Option.map(runner, ({ host, port }) => RunnerAddress.make(host, port)),
    runnerListenAddress: Option.flatMap(
      runner,
      ({ listenHost, port }) => listenHost === undefined ? Option.none() : Option.some(RunnerAddress.make(listenHost, port))
    ),
    shardsPerGroup: config.shardsPerGroup,
    shardLockExpiration: Duration.millis(config.failoverMs),
    shardLockRefreshInterval: Duration.millis(Math.max(1, Math.floor(config.failoverMs / 3))),
    refreshAssignmentsInterval: Duration.millis(config.refreshAssignmentsMs),
    entityMessagePollInterval: Duration.millis(config.pollMs),
    entityTerminationTimeout: Option.match(runner, { onNone: () => ShardingConfig.defaults.entityTerminationTimeout, onSome: ({ drainMs }) => Duration.millis(drainMs) })
  })

/** The cluster's own pool: its statements never wait behind the log's, nor the log's behind its. */
const pool = (config: Config.ClientConfig, applicationName: string) =>
  PgClient.layer({ url: Redacted.make(config.url), maxConnections: config.clusterConnections, applicationName }).pipe(
    Layer.mapError((error) =>
      new StateStore.StoreError({ message: `connecting to ${PgStore.describe(config.url)} failed: ${error.message}` })
    )
  )

/** The log (`PgStore`, its own pool), migrated when it opens. */
const store = (config: Config.ClientConfig, settings: Config.WorkerConfig["store"]) =>
  PgStore.layer({ ...settings, url: config.url, maxConnections: config.maxConnections })

/** An error's message, with that of its cause (a `SqlError`'s is the database's own). */
const reason = (error: unknown): string =>
  error instanceof Error
    ? error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message
    : String(error)

/** How often opening the cluster's tables is tried again, and how soon. */
const reopen = Schedule.exponential("100 millis").pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(5)))

/**
 * The cluster's message and runner storage, on the same database (tables `cluster_*`). Their
 * migrations create tables with `CREATE TABLE IF NOT EXISTS` and no lock, which Postgres refuses
 * to one of two processes doing it at once on a new database ("duplicate key value violates unique
 * constraint pg_type_typname_nsp_index"), and @effect/cluster turns that into a defect: each
 * attempt gets a scope of its own, closed when it fails, and a death is tried again as a failure.
 */
const storage = (config: Config.ClientConfig) => {
  const failed = (message: string) =>
    new StateStore.StoreError({ message: `opening the cluster's tables in ${PgStore.describe(config.url)} failed: ${message}` })
  const open = Layer.merge(SqlMessageStorage.layer, SqlRunnerStorage.layer)
  return Layer.scopedContext(Effect.gen(function*() {
    const scope = yield* Effect.scope
    const attempt = Effect.flatMap(Scope.fork(scope, ExecutionStrategy.sequential), (child) =>
      Layer.buildWithScope(open, child).pipe(
        Effect.catchAllCause((cause) =>
          Effect.zipRight(Scope.close(child, Exit.void), Effect.fail(failed(reason(Cause.squash(cause)))))
        )
      ))
    return yield* Effect.retry(attempt, reopen)
  }))
}

/**
 * A worker process: a cluster runner listening on `host:port` (`NodeClusterSocket`), with the
 * cluster's storage and the rx log (`PgStore`) on the Postgres at `url`, driving the goals of the
 * shards it owns with the LanguageModel given and each goal's tools from `Workspaces` (`layerShared`
 * for goals working in folders of a shared workspace root, `layerFixed` for tools that touch no
 * host's files). It also provides the store and
 * `Sharding`, so the process can submit goals itself. The log and the cluster each have their own
 * pool of connections (`maxConnections`, `clusterConnections`).
 */
export const layer = (
  input: Config.WorkerInput
): Layer.Layer<
  Sharding | StateStore.StateStore,
  StateStore.StoreError | PgStore.DatabaseRefused | SocketServerError,
  LanguageModel.LanguageModel | Workspaces.Workspaces
> =>
  Layer.unwrapEffect(Effect.map(Config.decodeWorker(input), (config) => {
    const runner = SocketRunner.layer.pipe(
      Layer.provide(RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc))),
      Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]),
      Layer.provide(storage(config)),
      Layer.provide(shardingConfig(config, Option.some(config))),
      Layer.provide(RpcSerialization.layerMsgPack)
    )
    return GoalEntity.layer(config.concurrency).pipe(
      Layer.provideMerge(Layer.provide(runner, pool(config, "rx-worker"))),
      Layer.provideMerge(store(config, config.store))
    )
  }))

/**
 * A process that submits goals (`submit`, `drive`) and reads the log, but runs none: a cluster
 * client without a runner, on the same Postgres.
 */
export const layerClient = (
  input: Config.ClientInput
): Layer.Layer<Sharding | StateStore.StateStore, StateStore.StoreError | PgStore.DatabaseRefused> =>
  Layer.unwrapEffect(Effect.map(Config.decodeClient(input), (config) => {
    const client = SocketRunner.layerClientOnly.pipe(
      Layer.provide(NodeClusterSocket.layerClientProtocol),
      Layer.provide(storage(config)),
      Layer.provide(shardingConfig(config, Option.none())),
      Layer.provide(RpcSerialization.layerMsgPack)
    )
    return Layer.merge(Layer.provide(client, pool(config, "rx-client")), store(config, {}))
  }))
