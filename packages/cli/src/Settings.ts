/**
 * The settings of a command, from flags, the environment (`RX_DB`, `RX_BASE_URL`, `RX_MODEL`,
 * `RX_API_KEY`) and, on resume, what the goal recorded. Recorded settings never include the key.
 */
import { Options } from "@effect/cli"
import { Path } from "@effect/platform"
import { Config, Effect, Option, Schema } from "effect"
import * as os from "node:os"

/** A usage problem: printed as `rx: <message>`, exit 1. */
export class UsageError extends Schema.TaggedError<UsageError>()("@rx/cli/UsageError", { message: Schema.String }) {}

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
export const maxCallsPerAnswer = Options.integer("max-calls-per-answer").pipe(
  Options.withDescription("tool calls of one model answer that run, in order; later ones are rejected (default 8)"),
  Options.optional
)
export const retries = Options.integer("retries").pipe(
  Options.withDescription("attempts after the first when the model server cannot be reached or answers 429/5xx (default 3); then the goal is suspended"),
  Options.optional
)
export const ask = Options.text("ask").pipe(
  Options.withDescription("tools whose calls wait for a person's approval, comma-separated (e.g. shell,write_file)"),
  Options.optional
)
export const deny = Options.text("deny").pipe(
  Options.withDescription("tools never allowed in this run, comma-separated; the model is told"),
  Options.optional
)
export const instructions = Options.text("instructions").pipe(
  Options.withDescription("a text file of standing instructions for the model, recorded with the goal"),
  Options.optional
)
export const agentsMd = Options.boolean("agents-md").pipe(
  Options.withDescription("also use AGENTS.md at the workspace root as instructions, if it exists")
)
export const call = Options.text("call").pipe(
  Options.withDescription("the call to decide, as rx inspect names it (default: the call the goal waits on)"),
  Options.optional
)
export const by = Options.text("by").pipe(
  Options.withDescription("who decides, as recorded (default: your user name)"),
  Options.optional
)
export const reason = Options.text("reason").pipe(
  Options.withDescription("why, as the model is told"),
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

/** Who decides, when `--by` is not given: the OS user name (else `$USER`, else `unknown`). */
export const userName: Effect.Effect<string> = Effect.try(() => os.userInfo().username).pipe(
  Effect.orElse(() => env("USER")),
  Effect.orElseSucceed(() => ""),
  Effect.map((name) => (name === "" ? "unknown" : name))
)

/** A comma-separated list of tool names: each one offered, none twice. */
const toolList = (flag: string, text: string, offered: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<string>, UsageError> => {
  const names = text.split(",").map((name) => name.trim()).filter((name) => name !== "")
  if (names.length === 0) return new UsageError({ message: `${flag} needs tool names, comma-separated (the tools: ${offered.join(", ")})` })
  const unknown = names.find((name) => !offered.includes(name))
  if (unknown !== undefined) return new UsageError({ message: `${flag}: there is no tool named ${JSON.stringify(unknown)} (the tools: ${offered.join(", ")})` })
  return Effect.succeed([...new Set(names)])
}

/** The approval policy of `--ask` and `--deny`: validated against the tools offered; a tool in both is an error. */
export const approval = (
  askFlag: Option.Option<string>,
  denyFlag: Option.Option<string>,
  offered: ReadonlyArray<string>
): Effect.Effect<Readonly<Record<string, "ask" | "deny">>, UsageError> =>
  Effect.gen(function*() {
    const ask = Option.isSome(askFlag) ? yield* toolList("--ask", askFlag.value, offered) : []
    const deny = Option.isSome(denyFlag) ? yield* toolList("--deny", denyFlag.value, offered) : []
    const both = ask.find((name) => deny.includes(name))
    if (both !== undefined) return yield* new UsageError({ message: `${both} is in both --ask and --deny: name each tool once` })
    return Object.fromEntries([...ask.map((name) => [name, "ask"] as const), ...deny.map((name) => [name, "deny"] as const)])
  })

/** A count flag, checked to be within bounds, as one line. */
export const within = (flag: string, value: Option.Option<number>, min: number, max = Number.MAX_SAFE_INTEGER): Effect.Effect<Option.Option<number>, UsageError> =>
  Option.isSome(value) && (value.value < min || value.value > max)
    ? new UsageError({ message: `${flag} must be a whole number from ${min}${max === Number.MAX_SAFE_INTEGER ? " up" : ` to ${max}`} (got ${value.value})` })
    : Effect.succeed(value)
