/**
 * The settings of the built-in tools: the workspace root, the sandbox mode, and every cap and
 * default. A Schema, so a caller can record the decoded config (for instance with a goal's
 * settings) and a later run can use exactly the same one.
 */
import { Decode } from "@rx/kernel"
import { Context, Effect, Layer, Schema } from "effect"
import * as Ip from "./internal/ip.js"

/**
 * How `shell` runs commands: `auto` uses bubblewrap when it works and otherwise leaves `shell` out
 * of the registry (`Builtins.Availability` says why); `bwrap` requires it; `none` runs unsandboxed.
 */
export const SandboxMode = Schema.Literal("auto", "bwrap", "none")
export type SandboxMode = typeof SandboxMode.Type

const positive = (fallback: number) =>
  Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => fallback })

/** A protected or hidden path: not empty, no NUL byte. */
const pathEntry = Schema.String.pipe(
  Schema.filter((path) => (path.length > 0 && !path.includes("\0")) || "a path must be non-empty and have no NUL byte")
)

/** An endpoint `http_fetch` never reaches: `host:port` or `[v6]:port`. */
const endpointEntry = Schema.String.pipe(
  Schema.filter((entry) => Ip.parseEndpoint(entry) !== undefined || `"${entry}" is not an endpoint: expected host:port or [v6]:port`)
)

/** The names of the built-in tools, in the order the model sees them (`Builtins.tools`). */
export const toolNames: ReadonlyArray<string> = [
  "read_file",
  "write_file",
  "edit_file",
  "list_dir",
  "find_files",
  "search_text",
  "shell",
  "http_fetch"
]

/** The name of a built-in tool. */
const toolName = Schema.String.pipe(
  Schema.filter((name) =>
    toolNames.includes(name) || `there is no built-in tool named "${name}"; the built-in tools are ${toolNames.join(", ")}`
  )
)

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
  /**
   * The built-in tools offered to the model, by name; default all of them. A chosen tool that
   * cannot run here (`shell` in mode `auto` without a usable sandbox) is still left out.
   */
  tools: Schema.optionalWith(Schema.Array(toolName), { exact: true }),
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
  /** `search_text`: time a search may take; then it stops and returns what it found, flagged. */
  searchTimeoutMs: positive(10_000),
  /**
   * `write_file`, `edit_file`: bytes a write may make a file hold at most. The default, 16 MiB,
   * is more than a model writes in one answer, so mostly edits that multiply a file reach it.
   */
  maxWriteBytes: positive(16 * 1024 * 1024),
  /** `shell`: timeout when the call gives none. */
  shellTimeoutMs: positive(60_000),
  /** `shell`: the largest `timeout_ms` a call may ask for. */
  shellMaxTimeoutMs: positive(600_000),
  /** `shell`: after the timeout, SIGTERM, then SIGKILL this many milliseconds later. */
  shellGraceMs: positive(2_000),
  /** `shell`: bytes kept of each of stdout and stderr (half from the start, half from the end). */
  shellOutputBytes: positive(32 * 1024),
  /**
   * `shell`: stop the command (its whole tree) once it has written more than this many bytes to
   * stdout and stderr together; the output then says `output_limited`.
   */
  shellMaxOutputBytes: positive(16 * 1024 * 1024),
  /** `shell`: processes (threads count too) one call may have at once; stops fork bombs. */
  shellMaxProcesses: positive(1_024),
  /** `shell`: writable private memory of each process (RLIMIT_DATA): heap and anonymous mappings. */
  shellMaxMemoryBytes: positive(4 * 1024 * 1024 * 1024),
  /** `shell`: CPU seconds of each process (RLIMIT_CPU). */
  shellMaxCpuSeconds: positive(600),
  /** `shell`: the largest file a command may write (RLIMIT_FSIZE); a larger write fails. */
  shellMaxFileBytes: positive(1024 * 1024 * 1024),
  /**
   * `shell`: the bubblewrap program, an absolute path. Default: the first of `/usr/bin/bwrap`,
   * `/usr/local/bin/bwrap`, `/bin/bwrap`; never looked up on PATH. It must be owned by root (or
   * by the user running rx), not writable by others, and outside the workspace.
   */
  bwrapPath: Schema.optional(Schema.String.pipe(
    Schema.filter((path) => path.startsWith("/") || "bwrapPath must be an absolute path")
  )),
  /**
   * Paths (relative to the workspace, or absolute inside it) the agent may read but not change:
   * refused to the writing tools, read-only in the sandbox. A name without `/` (`.git`) also
   * matches that name in any folder for the file tools. Missing paths are protected too.
   */
  protectedPaths: Schema.optionalWith(Schema.Array(pathEntry), { default: () => [".git"] }),
  /**
   * Paths the agent may neither read nor change, such as rx's own database inside the workspace:
   * refused to every file tool, left out of listings, hidden in the sandbox.
   */
  hiddenPaths: Schema.optionalWith(Schema.Array(pathEntry), { default: () => [] }),
  /** `shell`: names of the environment variables passed through (never one that looks secret). */
  shellEnv: Schema.optionalWith(Schema.Array(Schema.String), { default: () => defaultShellEnv }),
  /** `http_fetch`: hosts, addresses or CIDR ranges that may be fetched though not public. */
  httpAllow: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /**
   * `http_fetch`: endpoints (`host:port`, `[v6]:port`) never fetched, whatever `httpAllow` says,
   * such as the server running these tools (rx serve fills it with its own). An endpoint on a
   * loopback, unspecified or `localhost` host stands for every address of this machine at that
   * port (a server listening on all of them is reached by any); a name is also refused by name.
   */
  httpDeny: Schema.optionalWith(Schema.Array(endpointEntry), { default: () => [] }),
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
export class InvalidConfig extends Schema.TaggedError<InvalidConfig>()("@rx/tools/InvalidConfig", {
  message: Schema.String
}) {}

/** Decode caller input into a complete config. */
export const decode: (input: unknown) => Effect.Effect<Config, InvalidConfig> = Decode.config(
  Config,
  (problems) => new InvalidConfig({ message: `invalid tools config: ${problems}` })
)

/** The config as JSON. */
export const encode = (config: Config): typeof Config.Encoded => Schema.encodeSync(Config)(config)

/** The decoded config the built-in tools read. */
export class ToolsConfig extends Context.Tag("@rx/tools/ToolsConfig")<ToolsConfig, Config>() {}

/** Provide a config decoded from `input`. */
export const layer = (input: Input): Layer.Layer<ToolsConfig, InvalidConfig> => Layer.effect(ToolsConfig, decode(input))
