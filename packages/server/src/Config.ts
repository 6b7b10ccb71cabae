/**
 * The server's configuration. Every field but `token` and `workspace` has a default; the input
 * is decoded with this Schema, so a bad value is one clear error before anything listens.
 */
import { Decode, Settings } from "@rx/kernel"
import { Effect, Schema } from "effect"

const positive = (fallback: number) => Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => fallback })

export const Config = Schema.Struct({
  /** The address to listen on: loopback by default, so only this machine can reach the server. */
  host: Schema.optionalWith(Schema.NonEmptyTrimmedString, { default: () => "127.0.0.1" }),
  /**
   * Listen on an address other machines can reach (any `host` but loopback). Without it such a
   * host is refused: exposing a server that runs tools takes a decision, not a typo.
   */
  allowRemote: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** The port; 0 picks a free one (`Server.Server` says which). */
  port: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 65_535)), { default: () => 7_433 }),
  /** The bearer token every route but `/healthz` requires; at least 16 characters, compared in constant time. */
  token: Schema.Redacted(
    Schema.String.pipe(Schema.filter((token) => token.length >= 16 || "token must be at least 16 characters long"))
  ),
  /** The workspace root: each goal's workspace is this folder or one inside it, never outside. */
  workspace: Schema.NonEmptyString,
  /** Goals run at once; more are queued, in order. */
  concurrency: positive(4),
  /** Goals waiting to run at most; a submission beyond is refused (503) and records nothing. */
  maxQueued: positive(1_000),
  /** Bytes a request body may hold; a larger one is refused (413). */
  maxBodyBytes: positive(1024 * 1024),
  /** Clients following events at once; one more is refused (503). */
  maxSubscribers: positive(64),
  /** Events buffered for one follower of a goal's events. */
  subscriberBuffer: positive(1_024),
  /** A follower that takes nothing for this long with its buffer full is disconnected (it may reconnect with `Last-Event-ID`). */
  subscriberStallMs: positive(30_000),
  /** At shutdown, how long the runs get to stop and record it; connections still open 2 s after are closed regardless. */
  shutdownTimeoutMs: positive(5_000),
  /** Resume every open goal that does not wait for a person when the server starts. */
  resumeOnStart: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  /** Host names (with or without a port) clients may use besides the listen host, `127.0.0.1` and `localhost`. */
  allowedHosts: Schema.optionalWith(Schema.Array(Schema.NonEmptyTrimmedString), { default: () => [] }),
  /**
   * Offer `delegate` (sub-goals, `@rx/tools`' `Delegate`) to the goals submitted here: a sub-goal
   * runs with the server's model and log, in its parent's run, with tools of its workspace.
   */
  delegate: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Who decided, as recorded in `ApprovalDecided.by` for decisions made over HTTP. */
  approver: Schema.optionalWith(Schema.NonEmptyTrimmedString, { default: () => "http" }),
  /**
   * Settings recorded with each goal (`Options.settings`), beside its `workspace`: what the model
   * and tools are (a resume elsewhere reads them). A client cannot set them.
   */
  settings: Schema.optionalWith(Settings.Settings, { default: () => ({}) })
})
export type Config = typeof Config.Type
/** What a caller passes: `token`, `workspace` and any of the other fields. */
export type Input = typeof Config.Encoded

/** A configuration that does not decode, or a workspace root that is not a folder. */
export class InvalidConfig extends Schema.TaggedError<InvalidConfig>()("@rx/server/InvalidConfig", {
  message: Schema.String
}) {}

const decodeConfig = Decode.config(Config, (problems) => new InvalidConfig({ message: `invalid server configuration: ${problems}` }))

/** Whether `host` is this machine only: 127.0.0.0/8, ::1, localhost. */
export const isLoopback = (host: string): boolean => {
  const name = host.toLowerCase().replace(/^\[(.*)\]$/, "$1")
  return name === "localhost" || name === "::1" || /^127(\.\d{1,3}){3}$/.test(name)
}

/** Decode caller input; a failure names each offending field (never the token's value). */
export const decode = (input: Input): Effect.Effect<Config, InvalidConfig> =>
  decodeConfig(input).pipe(
    Effect.filterOrFail(
      (config) => config.allowRemote || isLoopback(config.host),
      (config) =>
        new InvalidConfig({
          message: `host ${config.host} lets other machines reach the server, which runs tools for whoever has the token: set allowRemote (rx serve --allow-remote) to mean it, and put TLS in front`
        })
    )
  )
