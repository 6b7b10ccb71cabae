/**
 * How a SQLite store opens its database. Every field but `filename` has a default; the input
 * is decoded with this Schema, so a bad value is a clear error before the file is touched.
 */
import { Effect, Schema } from "effect"
import { Decode, StateStore } from "@rx/kernel"

export const Config = Schema.Struct({
  /** The database file; created (with its tables) when missing, never recreated or overwritten. */
  filename: Schema.NonEmptyString,
  /**
   * `FULL` (default): a committed append survives power loss. `NORMAL`: it survives a crash of
   * rx, but the last commits may be lost on power loss; commits are much cheaper.
   */
  synchronous: Schema.optionalWith(Schema.Literal("FULL", "NORMAL"), { default: () => "FULL" as const }),
  /** How long a write waits for another process's transaction before failing as locked. */
  busyTimeoutMs: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { default: () => 5_000 }),
  /**
   * Save the State the runner hands with a batch that crosses a multiple of this many events, so
   * resume folds only what follows it.
   */
  snapshotEvery: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 1_000 }),
  /** How often `changes` looks for events appended by other processes. */
  pollIntervalMs: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 150 }),
  /** Open read-only (inspection): reads work, every append fails with a read-only error. */
  readonly: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /**
   * Create a new log when the file does not exist (never when read-only). An existing file is
   * never turned into a log: it must already be one. `false`: a missing file is refused too.
   */
  create: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  /** Run SQLite's `quick_check` when opening writable, refusing a damaged file before writing to it. */
  quickCheck: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  /** How often the holder of a goal's lease records that it is still running. */
  leaseHeartbeatMs: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 10_000 }),
  /**
   * A lease held from another host, whose heartbeat is older than this, is taken over (its
   * holder is presumed dead). Must exceed `leaseHeartbeatMs` plus the hosts' clock skew.
   */
  leaseTimeoutMs: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 30_000 })
}).pipe(
  Schema.filter((c) =>
    c.leaseTimeoutMs > c.leaseHeartbeatMs ||
    `leaseTimeoutMs (${c.leaseTimeoutMs}) must be greater than leaseHeartbeatMs (${c.leaseHeartbeatMs}), or a live runner on another host would lose its lease`
  )
)
export type Config = typeof Config.Type
/** What a caller passes: `filename` and any of the other fields. */
export type Input = typeof Config.Encoded

/** Decode caller input; a failure names each offending field. */
export const decode: (input: Input) => Effect.Effect<Config, StateStore.StoreError> = Decode.config(
  Config,
  (problems) => new StateStore.StoreError({ message: `invalid SQLite store configuration: ${problems}` })
)
