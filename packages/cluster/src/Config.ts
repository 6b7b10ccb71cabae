/**
 * How a worker joins the cluster and how fast the cluster notices a dead one. The input is decoded
 * with this Schema, so a bad value is a clear error before any connection is made or port opened.
 */
import { Effect, Schema } from "effect"
import { Decode, StateStore } from "@rx/kernel"
import { Config as PgConfig } from "@rx/store-pg"

/** A positive whole number of milliseconds, `fallback` when absent. */
const millis = (fallback: number) => Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => fallback })

const port = Schema.Int.pipe(Schema.between(1, 65535))

/** What a process that only submits goals (no runner) needs. */
const clientFields = {
  /**
   * The Postgres database of the log (`PgStore`), which also holds the cluster's message and
   * runner tables (`cluster_*`): `postgres://user:password@host:port/database`.
   */
  url: Schema.NonEmptyString.pipe(
    Schema.filter((url) => /^postgres(ql)?:\/\//.test(url) || "must be a postgres:// (or postgresql://) connection URL")
  ),
  /** The most connections the log's pool opens (`PgStore`'s `maxConnections`). */
  maxConnections: Schema.optionalWith(Schema.Int.pipe(Schema.greaterThanOrEqualTo(2)), { default: () => 10 }),
  /**
   * The most connections the cluster's own pool opens (its message and runner storage; one of
   * them is held for the shard locks).
   */
  clusterConnections: Schema.optionalWith(Schema.Int.pipe(Schema.greaterThanOrEqualTo(2)), { default: () => 5 }),
  /**
   * Failover time: how long a worker that stopped renewing its shard locks and heartbeat (a killed
   * process, a lost host) still owns its shards (`ShardingConfig.shardLockExpiration`). After
   * this, and at most `refreshAssignmentsMs` more, its goals move to the other workers. Every
   * worker and client of one cluster must use the same value. A worker stalled this long (a GC
   * pause, a slow database) loses its shards, so do not set it below a few seconds.
   */
  failoverMs: millis(15_000),
  /** How often a process reads which workers are alive and recomputes which worker owns which shard. */
  refreshAssignmentsMs: millis(1_000),
  /**
   * How often a worker reads messages not yet processed from storage (a send normally wakes it at
   * once; this is the fallback).
   */
  pollMs: millis(2_000),
  /** Shards per group: the same on every worker and client of the cluster. */
  shardsPerGroup: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 300 })
}

/** A process that submits goals to the workers without running any. */
export const ClientConfig = Schema.Struct(clientFields)
export type ClientConfig = typeof ClientConfig.Type
export type ClientInput = typeof ClientConfig.Encoded

/** A worker: a runner of the cluster that drives the goals of the shards it owns. */
export const WorkerConfig = Schema.Struct({
  ...clientFields,
  /**
   * The most goals this worker drives at once; `Drive` messages beyond it wait their turn. Keep it
   * below `maxConnections`: each running goal appends and reads through the log's pool, which also
   * holds one connection for leases.
   */
  concurrency: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 8 }),
  /**
   * How long a worker that is stopped (its Layer closed: SIGTERM) lets the goals it runs go on
   * before it interrupts them (`ShardingConfig.entityTerminationTimeout`). An interrupted goal
   * records the call in flight and `Suspended(shutdown)`, and goes on on another worker.
   */
  drainMs: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { default: () => 15_000 }),
  /** The host other workers reach this one at. */
  host: Schema.NonEmptyString,
  /** The port other workers reach this one at (it listens there). */
  port,
  /** The address to listen on, when it differs from `host` (`0.0.0.0` in a container). */
  listenHost: Schema.optional(Schema.NonEmptyString),
  /**
   * The log's settings beyond `url` and `maxConnections`, as `PgStore` takes them (and checks
   * them: see @rx/store-pg's configuration).
   */
  store: Schema.optionalWith(
    Schema.Struct({
      connectTimeoutMs: Schema.optional(Schema.Number),
      applicationName: Schema.optional(Schema.String),
      snapshotEvery: Schema.optional(Schema.Number),
      leaseTtlMs: Schema.optional(Schema.Number),
      leaseRenewMs: Schema.optional(Schema.Number),
      listenCheckMs: Schema.optional(Schema.Number)
    }),
    { default: () => ({}) }
  )
})
export type WorkerConfig = typeof WorkerConfig.Type
export type WorkerInput = typeof WorkerConfig.Encoded

const decodeWith = <A, I>(schema: Schema.Schema<A, I>, what: string): (input: I) => Effect.Effect<A, StateStore.StoreError> =>
  Decode.config(schema, (problems) => new StateStore.StoreError({ message: `invalid ${what} configuration: ${PgConfig.redact(problems)}` }))

/** Decode a worker's configuration; a failure names each offending field (never the URL's password). */
export const decodeWorker = decodeWith(WorkerConfig, "cluster worker")
/** Decode a client's configuration. */
export const decodeClient = decodeWith(ClientConfig, "cluster client")
