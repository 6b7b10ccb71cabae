/**
 * The settings of a command, from flags, the environment (`RX_DB`, `RX_BASE_URL`, `RX_MODEL`,
 * `RX_API_KEY`) and, on resume, what the goal recorded. Recorded settings never include the key.
 */
import { Options } from "@effect/cli"
import { Path } from "@effect/platform"
import { Config, Effect, Option, Schema } from "effect"
import * as os from "node:os"

/** A usage problem: printed as `rx: <message>`, exit 1. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

/** Where the log lives when neither `--db` nor `RX_DB` says, as `rx --help` tells it. */
export const defaultDbText = "$XDG_STATE_HOME/rx/rx.db, or ~/.local/state/rx/rx.db without XDG_STATE_HOME"

export const db = Options.text("db").pipe(
  Options.withDescription(`SQLite file of the event log (env RX_DB; default ${defaultDbText}: per user, outside any workspace)`),
  Options.optional
)

/** The log's file and what chose it. */
export interface Database {
  readonly file: string
  readonly source: "flag" | "env" | "default"
}

const env = (name: string) => Config.string(name).pipe(Config.withDefault(""), Effect.orElseSucceed(() => ""))

/**
 * The log when neither `--db` nor `RX_DB` names one: in the per-user state folder
 * (`$XDG_STATE_HOME/rx/rx.db`, else `~/.local/state/rx/rx.db`), out of the agent's workspace.
 * A relative `XDG_STATE_HOME` is ignored, as the XDG specification asks.
 */
export const defaultDb: Effect.Effect<string, never, Path.Path> = Effect.gen(function*() {
  const path = yield* Path.Path
  const state = yield* env("XDG_STATE_HOME")
  if (state !== "" && path.isAbsolute(state)) return path.join(state, "rx", "rx.db")
  const home = (yield* env("HOME")) || os.homedir()
  return path.join(home, ".local", "state", "rx", "rx.db")
})

/** The log's file: `--db`, else `RX_DB` (empty counts as unset), else `defaultDb`. */
export const database = (flag: Option.Option<string>): Effect.Effect<Database, UsageError, Path.Path> =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    if (Option.isSome(flag)) {
      if (flag.value === "") return yield* new UsageError({ message: "--db needs a file path (leave it out for the default log)" })
      return { file: path.resolve(flag.value), source: "flag" }
    }
    const fromEnv = yield* env("RX_DB")
    if (fromEnv !== "") return { file: path.resolve(fromEnv), source: "env" }
    return { file: yield* defaultDb, source: "default" }
  })
export const workspace = Options.directory("workspace").pipe(
  Options.withDescription("the folder the tools are confined to"),
  Options.optional
)
export const baseUrl = Options.text("base-url").pipe(
  Options.withDescription("OpenAI-compatible API root, e.g. http://127.0.0.1:11434/v1 for Ollama (env RX_BASE_URL)"),
  Options.withFallbackConfig(Config.string("RX_BASE_URL")),
  Options.optional
)
export const model = Options.text("model").pipe(
  Options.withDescription("model name on that server (env RX_MODEL)"),
  Options.withFallbackConfig(Config.string("RX_MODEL")),
  Options.optional
)
export const apiKey = Options.redacted("api-key").pipe(
  Options.withDescription("API key, if the server needs one (env RX_API_KEY); never recorded"),
  Options.withFallbackConfig(Config.redacted("RX_API_KEY")),
  Options.optional
)
export const maxIterations = Options.integer("max-iterations").pipe(
  Options.withDescription("iteration limit of the goal (default 50)"),
  Options.optional
)
export const sandbox = Options.choice("sandbox", ["auto", "bwrap", "none"]).pipe(
  Options.withDescription("shell sandbox: auto (bubblewrap if installed, else shell calls are refused), bwrap, or none"),
  Options.optional
)
export const mode = Options.choice("mode", ["tools", "json"]).pipe(
  Options.withDescription("native tool calls (default) or JSON actions, for servers that mangle tool calls"),
  Options.optional
)
export const json = Options.boolean("json").pipe(Options.withDescription("print each event as one JSON line"))

export const defaultBaseUrl = "http://127.0.0.1:11434/v1"

/** What a goal records of its settings (in `options.metadata`), to resume with the same ones. */
export const Recorded = Schema.Struct({
  workspace: Schema.optional(Schema.String),
  sandbox: Schema.optional(Schema.Literal("auto", "bwrap", "none")),
  baseUrl: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  mode: Schema.optional(Schema.Literal("tools", "json"))
})
export type Recorded = typeof Recorded.Type

/** Recorded settings of a goal's metadata; anything unreadable counts as not recorded. */
export const recorded = (metadata: unknown): Recorded =>
  Option.getOrElse(Schema.decodeUnknownOption(Recorded)(metadata), () => ({}))
