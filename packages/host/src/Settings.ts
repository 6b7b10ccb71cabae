/**
 * The settings of `rx`. Each one is a flag, an environment variable and (most) a config-file key,
 * with one parser, one description and one default, so the help, `rx config` and the commands
 * cannot disagree. A value comes from the first of: the flag, the environment, what the goal
 * recorded (on resume), the workspace's `rx.config.json`, the user's config file, the default.
 */
import * as AutoCorrect from "@effect/cli/AutoCorrect"
import * as CliConfig from "@effect/cli/CliConfig"
import { Path } from "@effect/platform"
import { Settings as RecordedSettings } from "@rx/kernel"
import type * as McpFlags from "@rx/mcp/Flags"
import { Config, Effect, Either, Option, ParseResult, Schema } from "effect"
import * as os from "node:os"

/** A usage problem: printed as `rx: <message>`, exit 1. */
export class UsageError extends Schema.TaggedError<UsageError>()("@rx/cli/UsageError", { message: Schema.String }) {}

/** A value a setting can hold. */
export type Value = string | number | boolean | ReadonlyArray<string>

/** What a setting says of itself: its flag, variable and config key, and its help. */
export interface Doc {
  /** The flag, without `--`; the config key is its camelCase (`max-iterations`: `maxIterations`). */
  readonly flag: string
  readonly env: string
  /** What the flag takes (`N`, `URL`), empty for a switch. */
  readonly placeholder: string
  readonly description: string
  /** The default as the help shows it, if there is one. */
  readonly shownDefault?: string
  /** Whether a config file may set it (not secrets, not the workspace a file is found in). */
  readonly inFile: boolean
  /**
   * Whether the workspace's config file may set it too. Not the settings a hostile repository
   * (or an earlier goal) could use against the user: the sandbox, the hosts http_fetch may reach,
   * the server the prompts go to, a file read into the prompt.
   */
  readonly inWorkspaceFile: boolean
}

/**
 * A setting: its value's Schema in a config file (`json`, the type a goal records where it records
 * the setting) and from a flag's or variable's text (`text`), each failing with one line,
 * `expected <what>, got <value>`.
 */
export interface Setting<A extends Value, I> extends Doc {
  readonly json: Schema.Schema<A, I>
  readonly text: Schema.Schema<A, string>
}

const shown = (value: unknown) => {
  const text = JSON.stringify(value) ?? String(value)
  return text.length > 80 ? `${text.slice(0, 77)}...` : text
}

/** The one-line refusal of a setting's Schema, whatever part of it failed. */
const expected = (what: string | ((actual: unknown) => string), got: (actual: unknown) => string = shown) => ({
  message: (issue: ParseResult.ParseIssue) => ({
    message: `expected ${typeof what === "string" ? what : what(issue.actual)}, got ${got(issue.actual)}`,
    override: true
  })
})

/** A number from text matching `pattern`, then checked as `json` checks it. */
const numberText = <I>(pattern: RegExp, json: Schema.Schema<number, I & number>) =>
  Schema.String.pipe(Schema.pattern(pattern), Schema.compose(Schema.NumberFromString), Schema.compose(Schema.typeSchema(json)))

const range = (min: number, max: number) => (max === Number.MAX_SAFE_INTEGER ? `from ${min} up` : `from ${min} to ${max}`)

/** A whole number within bounds: the Schemas of a config file's number and of a flag's text. */
export const integer = (min: number, max = Number.MAX_SAFE_INTEGER) => {
  const json = Schema.Int.pipe(Schema.between(min, max))
  const what = `a whole number ${range(min, max)}`
  return { json: json.annotations(expected(what)), text: numberText(/^\s*[+-]?\d+\s*$/, json).annotations(expected(what)) }
}

const decimal = (min: number, max: number) => {
  const json = Schema.Number.pipe(Schema.finite(), Schema.between(min, max))
  const what = `a number ${range(min, max)}`
  return { json: json.annotations(expected(what)), text: numberText(/^\s*[+-]?(\d+\.?\d*|\.\d+)\s*$/, json).annotations(expected(what)) }
}

/** Trimmed text that is not empty. */
const text = (what: string) => {
  const json = Schema.Trim.pipe(Schema.minLength(1)).annotations(
    expected(what, (actual) => (typeof actual === "string" ? "an empty value" : shown(actual)))
  )
  return { json, text: json }
}

export const defaultBaseUrl = "http://127.0.0.1:11434/v1"

/** An absolute `http:` or `https:` URL. */
const isHttpUrl = (value: string) => URL.canParse(value) && ["http:", "https:"].includes(new URL(value).protocol)

const httpUrl = () => {
  const json = Schema.Trim.pipe(Schema.filter(isHttpUrl)).annotations(expected(`an http:// or https:// URL such as ${defaultBaseUrl}`))
  return { json, text: json }
}

const choice = <const L extends string>(values: readonly [L, ...Array<L>]) => {
  const json = Schema.Literal(...values).annotations(expected(`one of ${values.join(", ")}`))
  return { json, text: Schema.compose(Schema.Trim, json, { strict: false }).annotations(expected(`one of ${values.join(", ")}`)) }
}

/** Names, comma-separated on the command line, an array (or the same text) in a config file. */
const list = () => {
  const names = Schema.transform(Schema.String, Schema.Array(Schema.String).pipe(Schema.minItems(1)), {
    strict: true,
    decode: (raw) => [...new Set(raw.split(",").map((name) => name.trim()).filter((name) => name !== ""))],
    encode: (names) => names.join(",")
  })
  const isNames = (actual: unknown) => typeof actual === "string" || (Array.isArray(actual) && actual.every((v) => typeof v === "string"))
  const json = Schema.Union(names, Schema.compose(Schema.transform(Schema.Array(Schema.String), Schema.String, {
    strict: true,
    decode: (parts) => parts.join(","),
    encode: (joined) => joined.split(",")
  }), names)).annotations(
    expected((actual) => (isNames(actual) ? "names, comma-separated" : "an array of names"), (actual) => (isNames(actual) ? "none" : shown(actual)))
  )
  return { json, text: names.annotations(expected("names, comma-separated", () => "none")) }
}

/** A switch: `true`/`false` in a config file, `1`/`0` (or yes/no, on/off; empty is off) in a variable. */
const onOff = () => ({
  json: Schema.Boolean.annotations(expected("true or false")),
  text: Schema.transform(
    Schema.compose(Schema.Trim, Schema.Lowercase).pipe(Schema.compose(Schema.Literal("1", "true", "yes", "on", "0", "false", "no", "off", ""), { strict: false })),
    Schema.Boolean,
    { strict: true, decode: (value) => ["1", "true", "yes", "on"].includes(value), encode: (on) => (on ? "1" : "0") }
  ).annotations(expected("1 or 0 (true or false)"))
})

const setting = <A extends Value, I>(
  flag: string,
  kind: { readonly json: Schema.Schema<A, I>; readonly text: Schema.Schema<A, string> },
  doc: {
    readonly placeholder: string
    readonly description: string
    readonly shownDefault?: string
    readonly inFile?: boolean
    readonly inWorkspaceFile?: boolean
  }
): Setting<A, I> => ({
  ...kind,
  flag,
  env: `RX_${flag.toUpperCase().replace(/-/g, "_")}`,
  inFile: doc.inFile ?? true,
  inWorkspaceFile: (doc.inFile ?? true) && (doc.inWorkspaceFile ?? true),
  placeholder: doc.placeholder,
  description: doc.description,
  ...(doc.shownDefault === undefined ? {} : { shownDefault: doc.shownDefault })
})

/** Where the log lives when neither `--db` nor `RX_DB` says, as `rx --help` tells it. */
export const defaultDbText = "$XDG_STATE_HOME/rx/rx.db, or ~/.local/state/rx/rx.db without XDG_STATE_HOME"

/** Seconds a dead worker keeps its goals before the others take them over, unless `--failover` says. */
export const defaultFailover = 15

/** The workspace config file's name, at the workspace root. */
export const workspaceFile = "rx.config.json"

/** Every setting, in the order the help and `rx config` show them. */
export const table = {
  db: setting("db", text("a file path or a postgres:// URL"), {
    placeholder: "FILE|URL",
    description: "the event log: a SQLite file (per user, outside any workspace by default), or a Postgres database (postgres://user:password@host/db)",
    shownDefault: defaultDbText,
    inFile: false
  }),
  workspace: setting("workspace", text("a folder"), {
    placeholder: "DIR",
    description: `the folder the tools are confined to (its ${workspaceFile} is read, and the agent may not change it)`,
    shownDefault: "the current folder",
    inFile: false
  }),
  baseUrl: setting("base-url", httpUrl(), {
    placeholder: "URL",
    description: "OpenAI-compatible API root (Ollama, llama.cpp, vLLM, LM Studio, OpenAI)",
    shownDefault: defaultBaseUrl,
    inWorkspaceFile: false
  }),
  model: setting("model", text("a model name"), { placeholder: "NAME", description: "model name on that server, e.g. qwen2.5-coder:7b" }),
  apiKey: setting("api-key", text("a key"), { placeholder: "KEY", description: "API key, if the server needs one; never recorded, never read from a config file", inFile: false }),
  mode: setting("mode", choice(RecordedSettings.Settings.fields.mode.from.literals), {
    placeholder: "tools|json",
    description: "native tool calls, or JSON actions for servers that mangle tool calls",
    shownDefault: "tools"
  }),
  modelFile: setting("model-file", text("a file path"), {
    placeholder: "FILE",
    description: "a GGUF model file to run inside rx (llama.cpp), with no server; every answer is constrained to an action of the offered tools",
    // A repository could name a crafted file for llama.cpp's parser.
    inWorkspaceFile: false
  }),
  threads: setting("threads", integer(1, 1_024), { placeholder: "N", description: "CPU threads of --model-file", shownDefault: "the CPU's cores" }),
  context: setting("context", integer(256, 4_194_304), {
    placeholder: "TOKENS",
    description: "tokens of context of --model-file: the prompt and the answer",
    shownDefault: "16384, or the model's own if smaller"
  }),
  seed: setting("seed", integer(0, 4_294_967_295), { placeholder: "N", description: "sampling seed of --model-file, for repeatable answers", shownDefault: "a new one each time" }),
  temperature: setting("temperature", decimal(0, 2), { placeholder: "T", description: "sampling temperature", shownDefault: "the server's; 0.8 with --model-file" }),
  maxOutputTokens: setting("max-output-tokens", integer(1), {
    placeholder: "N",
    description: "tokens of one answer at most (an answer cut off is rejected, never run)",
    shownDefault: "the server's; a quarter of --context with --model-file"
  }),
  timeout: setting("timeout", integer(1, 86_400), { placeholder: "SECONDS", description: "time one model request may take, retries included", shownDefault: "600" }),
  retries: setting("retries", integer(0, 99), {
    placeholder: "N",
    description: "attempts after the first when the server cannot be reached or answers 429/5xx; then the goal is suspended",
    shownDefault: "3"
  }),
  maxIterations: setting("max-iterations", integer(1), { placeholder: "N", description: "iterations the goal may take", shownDefault: "50" }),
  maxFailures: setting("max-failures", integer(1), { placeholder: "N", description: "failed tool calls in a row that end the goal (repeated_failure)", shownDefault: "3" }),
  maxMalformed: setting("max-malformed", integer(1), { placeholder: "N", description: "rejected model answers in a row that end the goal (malformed_output)", shownDefault: "3" }),
  maxRepeats: setting("max-repeats", integer(1), { placeholder: "N", description: "the same call with the same result this many times in a row ends the goal (no_progress)", shownDefault: "3" }),
  noProgressWindow: setting("no-progress-window", integer(1), { placeholder: "N", description: "iterations in a row without a successful call that end the goal (no_progress)", shownDefault: "8" }),
  promptBudget: setting("prompt-budget", integer(2_000), { placeholder: "CHARS", description: "characters of conversation a prompt holds; older output is compacted to fit", shownDefault: "32000" }),
  compact: setting("compact", choice(["on", "off"]), {
    placeholder: "on|off",
    description: "summarise the steps that leave the prompt (asked of the model, recorded), rather than only count them",
    shownDefault: "on"
  }),
  maxTotalTokens: setting("max-total-tokens", integer(1), { placeholder: "N", description: "tokens in and out the goal may spend (token_budget)", shownDefault: "unlimited" }),
  maxCallsPerAnswer: setting("max-calls-per-answer", integer(1), { placeholder: "N", description: "tool calls of one answer that run, in order; later ones are rejected", shownDefault: "8" }),
  maxAnswerChars: setting("max-answer-chars", integer(1), { placeholder: "CHARS", description: "characters one model answer may hold; a longer one is rejected", shownDefault: "1000000" }),
  maxDepth: setting("max-depth", integer(0, 100), { placeholder: "N", description: "how deep sub-goals (delegate) may nest below the goal", shownDefault: "2" }),
  maxChildren: setting("max-children", integer(0, 10_000), { placeholder: "N", description: "sub-goals one goal may delegate", shownDefault: "8" }),
  maxTreeGoals: setting("max-tree-goals", integer(1, 100_000), { placeholder: "N", description: "goals a tree of sub-goals may hold, its root included", shownDefault: "100" }),
  maxTreeIterations: setting("max-tree-iterations", integer(1), { placeholder: "N", description: "iterations the goals of a tree may take together; no sub-goal starts past it", shownDefault: "1000" }),
  tools: setting("tools", list(), {
    placeholder: "LIST",
    description: "the tools offered, comma-separated: built-ins, and delegate (sub-goals), which is offered only when named",
    shownDefault: "all built-ins that can run here"
  }),
  noShell: setting("no-shell", onOff(), { placeholder: "", description: "do not offer the shell tool" }),
  sandbox: setting("sandbox", choice(RecordedSettings.Settings.fields.sandbox.from.literals), {
    placeholder: "auto|bwrap|none",
    description: "the shell's sandbox: auto = bubblewrap when installed, else shell is not offered",
    shownDefault: "auto",
    inWorkspaceFile: false
  }),
  httpAllow: setting("http-allow", list(), {
    placeholder: "LIST",
    description: "private hosts, addresses or CIDR ranges http_fetch may reach, comma-separated",
    shownDefault: "public addresses only",
    inWorkspaceFile: false
  }),
  mcpStartTimeout: setting("mcp-start-timeout", integer(1, 3_600), {
    placeholder: "SECONDS",
    description: "time an MCP server may take to start and list its tools; a server's own startTimeout in the config file wins (give one that downloads itself more)",
    shownDefault: "10"
  }),
  mcpMaxTools: setting("mcp-max-tools", integer(1, 10_000), {
    placeholder: "N",
    description: "tools one MCP server may offer, in its order; the rest are left out, recorded and said",
    shownDefault: "100",
    // A repository could raise what a hostile server may put in every prompt.
    inWorkspaceFile: false
  }),
  mcpMaxSchema: setting("mcp-max-schema", integer(256, 1_048_576), {
    placeholder: "CHARS",
    description: "characters of one MCP tool's description and input schema; a larger tool is left out, recorded and said",
    shownDefault: "8192",
    inWorkspaceFile: false
  }),
  ask: setting("ask", list(), { placeholder: "LIST", description: "tools whose calls wait for a person's approval, comma-separated (e.g. shell,write_file)" }),
  deny: setting("deny", list(), { placeholder: "LIST", description: "tools never allowed in this goal; the model is told" }),
  instructions: setting("instructions", text("a file path"), {
    placeholder: "FILE",
    description: "a text file of standing instructions for the model, recorded with the goal",
    inWorkspaceFile: false
  }),
  agentsMd: setting("agents-md", onOff(), { placeholder: "", description: "also use AGENTS.md at the workspace root as instructions" }),
  minAgreement: setting("min-agreement", decimal(0, 1), {
    placeholder: "X",
    description: "rx eval: the least share of recorded decisions (0 to 1) the model must make again the same; below it, rx eval exits 12"
  }),
  server: setting("server", httpUrl(), {
    placeholder: "URL",
    description: "run the command against the rx serve at this URL; its token from RX_TOKEN or, for a server on this machine, the token file next to the log",
    inFile: false
  })
} as const

export type Table = typeof table
export type Key = keyof Table
export type Values = { readonly [K in Key]: Schema.Schema.Type<Table[K]["json"]> }

/**
 * The settings as a config file holds them (by the table's keys, each optional), and as a goal
 * records those it records: `Recorded`'s fields have these types (checked below).
 */
export const File: Schema.Struct<{ readonly [K in Key]: Schema.optional<Table[K]["json"]> }> = Schema.Struct(
  Object.fromEntries(Object.entries(table).map(([key, s]) => [key, Schema.optional(s.json)])) as { readonly [K in Key]: Schema.optional<Table[K]["json"]> }
)

/** A setting a goal records has the type the table gives it. */
type Fits<K extends keyof Recorded> = K extends Key ? (Values[K] extends NonNullable<Recorded[K]> ? K : never) : K
export const recordedKeys: ReadonlyArray<Fits<keyof Recorded>> = RecordedSettings.keys

export const keys = Object.keys(table) as ReadonlyArray<Key>

/** The settings that are switches (no value): `--no-shell`, `--agents-md`. */
export const isSwitch = (key: Key) => table[key].placeholder === ""

/** Where a value came from. */
export type Source =
  | { readonly _tag: "flag" }
  | { readonly _tag: "env"; readonly name: string }
  | { readonly _tag: "recorded" }
  | { readonly _tag: "file"; readonly file: string }
  | { readonly _tag: "default" }

export const describeSource = (source: Source) => {
  switch (source._tag) {
    case "flag":
      return "flag"
    case "env":
      return `env ${source.name}`
    case "recorded":
      return "recorded with the goal"
    case "file":
      return source.file
    case "default":
      return "default"
  }
}

/** Values found in one place, each with where. */
export type Found = { readonly [K in Key]?: { readonly value: Values[K]; readonly source: Source } }

/** A value decoded by `schema`, or the one line saying why not, prefixed by where it was given. */
const parsed = (schema: Schema.Schema.AnyNoContext, raw: unknown, where: string): Either.Either<Value, UsageError> =>
  Either.mapLeft(
    Schema.decodeUnknownEither(schema)(raw),
    (error) => new UsageError({ message: `${where}: ${ParseResult.TreeFormatter.formatErrorSync(error)}` })
  )

/**
 * A flag's text decoded by a setting's (or any) text Schema: the value, or the one line saying
 * why not, `--flag: expected <what>, got <text>`. The command line decodes each flag with it once.
 */
export const decodeFlag = <A>(flag: string, schema: Schema.Schema<A, string>, raw: string): Either.Either<A, UsageError> =>
  Either.mapLeft(Schema.decodeUnknownEither(schema)(raw), (error) => new UsageError({ message: `--${flag}: ${ParseResult.TreeFormatter.formatErrorSync(error)}` }))

/** A setting's text Schema, as one of any setting's values (each row's Schema has its own type). */
export const textOf = (key: Key): Schema.Schema<Value, string> => table[key].text as Schema.Schema<Value, string>

/** The values given as flags, already typed (a switch given is `true`), each with where it came from. */
export const fromGiven = (given: Given): Found =>
  Object.fromEntries(keys.flatMap((key) => (given[key] === undefined || given[key] === false ? [] : [[key, { value: given[key], source: { _tag: "flag" } }]]))) as Found

/** Values of the `RX_*` variables that are set and not empty, for the settings in `only`. */
export const fromEnv = (only: ReadonlyArray<Key>): Effect.Effect<Found, UsageError> =>
  Effect.gen(function*() {
    const found: Record<string, { value: Value; source: Source }> = {}
    for (const key of only) {
      const name = table[key].env
      const raw = yield* env(name)
      if (raw === "") continue
      found[key] = { value: yield* parsed(table[key].text, raw, name), source: { _tag: "env", name } }
    }
    return found as Found
  })

/** A name without its leading dashes, in lower case: what two names are compared by. */
const bare = (name: string) => name.replace(/^-+/, "").toLowerCase()

/**
 * The closest key to a misspelt one, if any is close (case aside, as @effect/cli's own
 * suggestions); else the one name the word cuts short or runs on past (`--max-iter`, `evaluate`
 * for `eval`), when they share at least four characters.
 */
const closest = (word: string, candidates: ReadonlyArray<string>): string | undefined => {
  const best = candidates.map((c) => [c, AutoCorrect.levensteinDistance(word, c, CliConfig.defaultConfig)] as const).sort((a, b) => a[1] - b[1])[0]
  if (best !== undefined && best[1] <= Math.max(2, Math.floor(word.length / 4))) return best[0]
  const typed = bare(word)
  const prefixed = candidates.filter((c) => {
    const name = bare(c)
    return Math.min(name.length, typed.length) >= 4 && (name.startsWith(typed) || typed.startsWith(name))
  })
  return prefixed.length === 1 ? prefixed[0] : undefined
}

/** Suggest the closest of `candidates`: ` (did you mean X?)`, or nothing. */
export const suggest = (word: string, candidates: ReadonlyArray<string>) => {
  const near = closest(word, candidates)
  return near === undefined ? "" : ` (did you mean ${near}?)`
}

/**
 * The values of a config file's JSON: an object of setting keys (`$schema` is ignored). Paths
 * (`instructions`, `modelFile`) are relative to the file's folder. The workspace's file sets fewer settings
 * than the user's (see `inWorkspaceFile`).
 */
export const fromFile = (
  file: string,
  json: unknown,
  resolve: (relative: string) => string,
  place: "workspace" | "user"
): Either.Either<Found, UsageError> => {
  const fail = (message: string) => Either.left(new UsageError({ message: `config file ${file}: ${message}` }))
  if (typeof json !== "object" || json === null || Array.isArray(json)) return fail(`expected a JSON object of settings, got ${shown(json)}`)
  const allowed = keys.filter((key) => (place === "workspace" ? table[key].inWorkspaceFile : table[key].inFile))
  const given: Record<string, unknown> = {}
  for (const [name, raw] of Object.entries(json)) {
    if (name === "$schema") continue
    // Read apart (`McpFlags.configured`): the user's own file alone may name what MCP servers get.
    if (name === mcpServersKey) {
      if (place === "user") continue
      return fail(`${mcpServersKey} cannot be set in a workspace's config file, which a repository or an earlier goal may have written: it gives MCP servers variables, a sandbox and trust (set it in your own config file)`)
    }
    const key = allowed.find((k) => k === name)
    if (key === undefined) {
      const known = keys.find((k) => k === name)
      return fail(
        known !== undefined && place === "workspace" && table[known].inFile
          ? `${name} cannot be set in a workspace's config file, which a repository or an earlier goal may have written (set it in your own config file, ${table[known].env} or --${table[known].flag})`
          : known !== undefined
          ? `${name} cannot be set in a config file (use --${table[known].flag} or ${table[known].env})`
          : `unknown setting ${JSON.stringify(name)}${suggest(name, allowed)}; the settings: ${allowed.join(", ")}`
      )
    }
    given[key] = raw
  }
  const decoded = Schema.decodeUnknownEither(File)(given)
  if (Either.isLeft(decoded)) {
    const first = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)[0]
    return fail(`${first?.path.join(".") ?? "a setting"}: ${first?.message ?? "is not valid"}`)
  }
  const paths = { instructions: decoded.right.instructions, modelFile: decoded.right.modelFile }
  const values = { ...decoded.right, ...Object.fromEntries(Object.entries(paths).flatMap(([key, value]) => (value === undefined ? [] : [[key, resolve(value)]]))) }
  return Either.right(Object.fromEntries(Object.entries(values).map(([key, value]) => [key, { value, source: { _tag: "file", file } }])) as Found)
}

/** The key of the user's config file that holds each MCP server's settings, by the server's name. */
export const mcpServersKey = "mcpServers"

/** The first place that has each key: earlier places win. */
export const merge = (...places: ReadonlyArray<Found>): Found => {
  const merged: Record<string, unknown> = {}
  for (const place of [...places].reverse()) Object.assign(merged, place)
  return merged as Found
}

/** Just the values. */
export const values = (found: Found): Partial<Values> =>
  Object.fromEntries(Object.entries(found).map(([key, entry]) => [key, entry?.value])) as Partial<Values>

const env = (name: string) => Config.string(name).pipe(Config.withDefault(""), Effect.orElseSucceed(() => ""))

/**
 * The log when neither `--db` nor `RX_DB` names one: in the per-user state folder
 * (`$XDG_STATE_HOME/rx/rx.db`, else `~/.local/state/rx/rx.db`), out of the agent's workspace.
 * A relative `XDG_STATE_HOME` is ignored, as the XDG specification asks.
 */
export const defaultDb: Effect.Effect<string, never, Path.Path> = userFolder("XDG_STATE_HOME", [".local", "state"], "rx.db")

/** The user's config file: `$XDG_CONFIG_HOME/rx/config.json`, else `~/.config/rx/config.json`. */
export const userConfigFile: Effect.Effect<string, never, Path.Path> = userFolder("XDG_CONFIG_HOME", [".config"], "config.json")

function userFolder(variable: string, fallback: ReadonlyArray<string>, name: string): Effect.Effect<string, never, Path.Path> {
  return Effect.gen(function*() {
    const path = yield* Path.Path
    const base = yield* env(variable)
    if (base !== "" && path.isAbsolute(base)) return path.join(base, "rx", name)
    const home = (yield* env("HOME")) || os.homedir()
    return path.join(home, ...fallback, "rx", name)
  })
}

/** The log and what chose it: a SQLite file, or a Postgres database. */
export interface Database {
  /** The SQLite file, or the Postgres connection URL (which may hold a password: print `label`). */
  readonly file: string
  readonly source: "flag" | "env" | "default"
  readonly postgres: boolean
  /** How messages name the log: the file, or the URL without its password. */
  readonly label: string
}

/** A Postgres connection URL, as `--db` and `RX_DB` take it. */
export const isPostgres = (value: string) => /^postgres(ql)?:\/\//i.test(value.trim())

/** The password of a Postgres URL hidden. */
export const redactUrl = (url: string) => url.replace(/^(postgres(?:ql)?:\/\/[^:/@\s]*:)[^@\s]*@/i, "$1***@")

/** The user and password part of a URL (`https://user:pass@host/v1`), up to its last `@` before the host ends. */
const userinfo = /^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i

/** A URL without its user and password: what a goal records of its base URL (the credentials are used, never stored). */
export const withoutUserinfo = (url: string) => url.replace(userinfo, "$1")

/** A URL as shown: its user and password, if any, as `***`. */
export const redactUserinfo = (url: string) => url.replace(userinfo, "$1***@")

/** The log: `--db`, else `RX_DB` (empty counts as unset), else `defaultDb`. A `postgres://` URL names a Postgres log. */
export const database = (flag: Option.Option<string>): Effect.Effect<Database, UsageError, Path.Path> =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const of = (value: string, source: Database["source"]): Database => {
      if (isPostgres(value)) return { file: value.trim(), source, postgres: true, label: redactUrl(value.trim()) }
      const file = path.resolve(value)
      return { file, source, postgres: false, label: file }
    }
    if (Option.isSome(flag)) {
      if (flag.value.trim() === "") return yield* new UsageError({ message: "--db needs a file path or a postgres:// URL (leave it out for the default log)" })
      return of(flag.value, "flag")
    }
    const fromEnv = yield* env("RX_DB")
    if (fromEnv !== "") return of(fromEnv, "env")
    return of(yield* defaultDb, "default")
  })

/** What a goal records of its settings (`Options.settings`), to resume with the same ones. */
export type Recorded = RecordedSettings.Settings

/**
 * The recorded settings that are settings of this table, read through the table's Schemas. A value
 * this rx would not take from a user (a library may have recorded any `Settings`, a sub-goal no
 * tools) is refused when the command can replace it (`changeable`), naming the flag, unless `over`
 * (the flags and variables given) replaces it already; otherwise it stays as recorded.
 */
export const fromRecorded = (r: Recorded, over: Found = {}, changeable: ReadonlyArray<Key> = keys): Effect.Effect<Found, UsageError> =>
  Effect.forEach(keys.filter((key): key is Key & keyof Recorded => recordedKeys.some((k) => k === key) && r[key as keyof Recorded] !== undefined && over[key] === undefined), (key) =>
    Either.match(parsed(table[key].json, r[key], key), {
      onLeft: (error): Effect.Effect<readonly [Key, unknown], UsageError> =>
        changeable.includes(key)
          ? new UsageError({ message: `the goal recorded ${error.message}: give --${table[key].flag} to go on with another value` })
          : Effect.succeed([key, { value: r[key], source: { _tag: "recorded" } }]),
      onRight: (value): Effect.Effect<readonly [Key, unknown], UsageError> => Effect.succeed([key, { value, source: { _tag: "recorded" } }])
    })).pipe(Effect.map((entries) => Object.fromEntries(entries) as Found))

/** The server token of `RX_TOKEN`, trimmed, if set and not empty: read here alone, through the ConfigProvider. */
export const token: Effect.Effect<Option.Option<string>> = Effect.map(env("RX_TOKEN"), (raw) => Option.filter(Option.some(raw.trim()), (t) => t !== ""))

/** Who decides, when `--by` is not given: the OS user name (else `$USER`, else `unknown`). */
export const userName: Effect.Effect<string> = Effect.try(() => os.userInfo().username).pipe(
  Effect.orElse(() => env("USER")),
  Effect.orElseSucceed(() => ""),
  Effect.map((name) => (name === "" ? "unknown" : name))
)

/** Tool names of a list setting: each one a tool that exists. */
export const toolNames = (key: "tools" | "ask" | "deny", names: ReadonlyArray<string>, known: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<string>, UsageError> => {
  const unknown = names.find((name) => !known.includes(name))
  return unknown === undefined
    ? Effect.succeed(names)
    : new UsageError({ message: `--${table[key].flag}: there is no tool named ${JSON.stringify(unknown)}${suggest(unknown, known)} (the tools: ${known.join(", ")})` })
}

/**
 * The approval policy of `ask` and `deny`: each a tool that exists (`known`) and is offered; a
 * tool in both is an error.
 */
export const approval = (
  ask: ReadonlyArray<string>,
  deny: ReadonlyArray<string>,
  known: ReadonlyArray<string>,
  offered: ReadonlyArray<string>
): Effect.Effect<Readonly<Record<string, "ask" | "deny">>, UsageError> =>
  Effect.gen(function*() {
    for (const [key, names] of [["ask", ask], ["deny", deny]] as const) {
      yield* toolNames(key, names, known)
      const off = names.find((name) => !offered.includes(name))
      if (off !== undefined) return yield* new UsageError({ message: `--${key}: ${off} is not offered in this goal (offered: ${offered.join(", ")})` })
    }
    const both = ask.find((name) => deny.includes(name))
    if (both !== undefined) return yield* new UsageError({ message: `${both} is in both --ask and --deny: name each tool once` })
    return Object.fromEntries([...ask.map((name) => [name, "ask"] as const), ...deny.map((name) => [name, "deny"] as const)])
  })

/** The settings of the model. */
export const modelKeys: ReadonlyArray<Key> = ["baseUrl", "model", "apiKey", "mode", "modelFile", "threads", "context", "seed", "temperature", "maxOutputTokens", "timeout", "retries"]
/** A goal's limits (its options): only a flag changes them on resume. */
export const limitKeys: ReadonlyArray<Key> = ["maxIterations", "maxFailures", "maxMalformed", "maxRepeats", "noProgressWindow", "promptBudget", "compact", "maxTotalTokens", "maxCallsPerAnswer", "maxAnswerChars", "maxDepth", "maxChildren", "maxTreeGoals", "maxTreeIterations"]
/** The settings of the tools. */
export const toolKeys: ReadonlyArray<Key> = ["workspace", "tools", "noShell", "sandbox", "httpAllow", "ask", "deny", "instructions", "agentsMd"]
/** How MCP servers are started and bounded. */
export const mcpKeys: ReadonlyArray<Key> = ["mcpStartTimeout", "mcpMaxTools", "mcpMaxSchema"]
/** The settings of `rx run` (and what `rx config` shows). */
export const runKeys: ReadonlyArray<Key> = ["db", ...modelKeys, ...limitKeys, ...toolKeys, ...mcpKeys]
/** What a resume may change: the model, the server, the workspace, the sandbox and the limits. */
export const resumeKeys: ReadonlyArray<Key> = ["db", ...modelKeys, ...limitKeys, "workspace", "sandbox", ...mcpKeys]
/** The settings of `rx serve`: the goals' model and tools. */
export const serveKeys: ReadonlyArray<Key> = ["db", ...modelKeys, "workspace", "tools", "noShell", "sandbox", "httpAllow", ...mcpKeys]
/** The settings of `rx eval`: the log, the model asked, other instructions, the gate. */
export const evalKeys: ReadonlyArray<Key> = ["db", ...modelKeys, "instructions", "minAgreement"]
/** The settings of `rx worker`. */
export const workerKeys: ReadonlyArray<Key> = ["db", ...modelKeys, "workspace", "tools", "noShell", "sandbox", "httpAllow"]

/** The settings given as flags, typed by the command line (absent: not given). */
export type Given = { readonly [K in Key]?: Values[K] }

/** A command's `--db`, if given. */
export const dbFlag = (given: Given): Option.Option<string> => Option.fromNullable(given.db)

/** `--mcp` and its companions do not apply against a server, which runs goals with its own tools. */
export const noMcp = (flags: Partial<McpFlags.McpFlags>, command: string) =>
  (flags.mcp?.length ?? 0) + (flags.mcpEnv?.length ?? 0) + (flags.mcpSandbox?.length ?? 0) === 0
    ? Effect.void
    : new UsageError({ message: `--mcp, --mcp-env and --mcp-sandbox do not apply to ${command}: the server runs goals with its own MCP servers (rx serve --mcp)` })

/** Flags given that are not in `allowed`: each is refused, as the server's own settings apply. */
export const refuseOthers = (given: Given, allowed: ReadonlyArray<Key>, what: string, against = "--server") => {
  const other = keys.find((key) => !allowed.includes(key) && key !== "server" && key !== "db" && given[key] !== undefined && given[key] !== false)
  return other === undefined
    ? Effect.void
    : new UsageError({ message: `--${table[other].flag} does not apply with ${against}: ${against === "--server" ? "the server runs goals with its own model, tools and sandbox" : "the workers run goals with their own model"} (${what})` })
}

