/**
 * The settings of the built-in tools: the workspace root, the sandbox mode, and every cap and
 * default. A Schema, so a caller can record the decoded config (for instance in a goal's
 * `metadata`) and a later run can use exactly the same one.
 */
import { Context, Effect, Layer, ParseResult, Schema } from "effect"

/** How `shell` runs commands: `auto` uses bubblewrap when found and refuses shell calls otherwise. */
export const SandboxMode = Schema.Literal("auto", "bwrap", "none")
export type SandboxMode = typeof SandboxMode.Type

const positive = (fallback: number) =>
  Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => fallback })

/** Environment variables a shell command may see, when rx has them. */
export const defaultShellEnv: ReadonlyArray<string> = [
  "PATH",
  "HOME",
  "LANG",
  "LANGUAGE",
  "LC_ALL",
  "LC_CTYPE",
  "LC_MESSAGES",
  "TZ",
  "TERM",
  "USER",
  "LOGNAME"
]

export const Config = Schema.Struct({
  /** The folder every file tool and `shell` is confined to. */
  workspace: Schema.String,
  /** How `shell` is sandboxed. */
  sandbox: Schema.optionalWith(SandboxMode, { default: () => "auto" as const }),
  /** `read_file`: lines returned when the call gives no `limit`. */
  readDefaultLines: positive(2_000),
  /** `read_file`: bytes of content returned at most; longer ranges are cut at a line end. */
  readMaxBytes: positive(64 * 1024),
  /** `list_dir`, `find_files`: entries returned at most. */
  maxEntries: positive(1_000),
  /** `search_text`: matches returned at most. */
  maxMatches: positive(200),
  /** `search_text`: files larger than this are skipped. */
  searchMaxFileBytes: positive(1024 * 1024),
  /** `shell`: timeout when the call gives none. */
  shellTimeoutMs: positive(60_000),
  /** `shell`: the largest `timeout_ms` a call may ask for. */
  shellMaxTimeoutMs: positive(600_000),
  /** `shell`: after the timeout, SIGTERM, then SIGKILL this many milliseconds later. */
  shellGraceMs: positive(2_000),
  /** `shell`: bytes kept of each of stdout and stderr (half from the start, half from the end). */
  shellOutputBytes: positive(32 * 1024),
  /** `shell`: names of the environment variables passed through (never one that looks secret). */
  shellEnv: Schema.optionalWith(Schema.Array(Schema.String), { default: () => defaultShellEnv }),
  /** `http_fetch`: hosts, addresses or CIDR ranges that may be fetched though not public. */
  httpAllow: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /** `http_fetch`: timeout of a whole fetch, redirects included. */
  httpTimeoutMs: positive(30_000),
  /** `http_fetch`: bytes of response body read at most; the rest is dropped. */
  httpMaxBytes: positive(256 * 1024),
  /** `http_fetch`: redirects followed at most. */
  httpMaxRedirects: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 20)), { default: () => 5 })
})
export type Config = typeof Config.Type
/** What a caller passes: `workspace`, and any other field to override its default. */
export type Input = typeof Config.Encoded

/** A config that does not decode; the message names each offending field. */
export class InvalidConfig extends Schema.TaggedError<InvalidConfig>()("InvalidConfig", {
  message: Schema.String
}) {}

const decodeConfig = Schema.decodeUnknown(Config, { errors: "all", onExcessProperty: "error" })

/** Decode caller input into a complete config. */
export const decode = (input: unknown): Effect.Effect<Config, InvalidConfig> =>
  decodeConfig(input).pipe(
    Effect.mapError((error) =>
      new InvalidConfig({ message: `invalid tools config: ${ParseResult.TreeFormatter.formatErrorSync(error)}` })
    )
  )

/** The config as JSON, for a goal's `metadata`. */
export const encode = (config: Config): typeof Config.Encoded => Schema.encodeSync(Config)(config)

/** The decoded config the built-in tools read. */
export class ToolsConfig extends Context.Tag("@rx/tools/ToolsConfig")<ToolsConfig, Config>() {}

/** Provide a config decoded from `input`. */
export const layer = (input: Input): Layer.Layer<ToolsConfig, InvalidConfig> => Layer.effect(ToolsConfig, decode(input))
