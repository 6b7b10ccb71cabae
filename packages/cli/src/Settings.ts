/**
 * The settings of a command, from flags, the environment (`RX_DB`, `RX_BASE_URL`, `RX_MODEL`,
 * `RX_API_KEY`) and, on resume, what the goal recorded. Recorded settings never include the key.
 */
import { Options } from "@effect/cli"
import { Config, Option, Schema } from "effect"

export const db = Options.text("db").pipe(
  Options.withDescription("SQLite file of the event log (env RX_DB)"),
  Options.withFallbackConfig(Config.string("RX_DB")),
  Options.withDefault(".rx/rx.db")
)
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
