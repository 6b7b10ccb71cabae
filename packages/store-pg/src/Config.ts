/**
 * How a Postgres store connects and behaves. Every field but `url` has a default; the input is
 * decoded with this Schema, so a bad value is a clear error before any connection is made.
 */
import { Effect, Schema } from "effect"
import { Decode, StateStore } from "@rx/kernel"

/** A positive whole number (milliseconds, events), `fallback` when absent. */
const positive = (fallback: number) => Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => fallback })

export const Config = Schema.Struct({
  /** `postgres://user:password@host:port/database`; the database must exist (rx creates its tables). */
  url: Schema.NonEmptyString.pipe(
    Schema.filter((url) => /^postgres(ql)?:\/\//.test(url) || "must be a postgres:// (or postgresql://) connection URL")
  ),
  /**
   * The most connections the store opens for its pool. Besides the pool, a store that follows
   * goals (`changes`) keeps one more connection for LISTEN.
   */
  maxConnections: Schema.optionalWith(Schema.Int.pipe(Schema.greaterThanOrEqualTo(2)), { default: () => 10 }),
  /** How long connecting may take before the store fails to open, or a statement fails to get a connection. */
  connectTimeoutMs: positive(10_000),
  /** The name the store's sessions show in `pg_stat_activity`. */
  applicationName: Schema.optionalWith(Schema.String, { default: () => "rx" }),
  /**
   * Save the State the runner hands with a batch that crosses a multiple of this many events, so
   * resume folds only what follows it.
   */
  snapshotEvery: positive(1_000),
  /**
   * How long a goal's lease lasts without renewal (measured by the database's clock, so hosts'
   * clocks never matter). A holder that stops renewing (a hung process, a lost host) loses the
   * lease this long after its last renewal; a holder whose database session ends (its process
   * died) loses it at once.
   */
  leaseTtlMs: positive(30_000),
  /** How often the holder of a lease renews it. */
  leaseRenewMs: positive(10_000),
  /**
   * How often a store that follows goals checks that its LISTEN connection still receives
   * notifications (it notifies itself); one that does not is replaced, and followers read again.
   */
  listenCheckMs: positive(30_000)
}).pipe(
  Schema.filter((c) =>
    c.leaseTtlMs > c.leaseRenewMs ||
    `leaseTtlMs (${c.leaseTtlMs}) must be greater than leaseRenewMs (${c.leaseRenewMs}), or a live runner would lose its lease between two renewals`
  )
)
export type Config = typeof Config.Type
/** What a caller passes: `url` and any of the other fields. */
export type Input = typeof Config.Encoded

/** Decode caller input; a failure names each offending field (never the URL's password). */
export const decode: (input: Input) => Effect.Effect<Config, StateStore.StoreError> = Decode.config(
  Config,
  (problems) => new StateStore.StoreError({ message: `invalid Postgres store configuration: ${redact(problems)}` })
)

/** A connection URL, or text holding one, with its password replaced by `***`. */
export const redact = (text: string): string => text.replace(/(postgres(?:ql)?:\/\/[^:/@\s]*:)[^@\s]*@/g, "$1***@")
