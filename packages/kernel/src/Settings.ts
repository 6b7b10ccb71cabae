/**
 * What a goal records of the settings its transport runs it with: where its tools act and which
 * model answers. The kernel records them in the goal's options (`Options.settings`, so a resume
 * that changes them is an `OptionsChanged`) and never reads them; the CLI, the server and the
 * cluster read them back through this one Schema. Logs of event version 2 and before kept them as
 * loose keys of `options.metadata`: `Event`'s upcaster moves them here (`fromMetadata`).
 */
import { Schema } from "effect"

const Count = Schema.Int.pipe(Schema.nonNegative())

export const Settings = Schema.Struct({
  /** The folder the tools are confined to, absolute. */
  workspace: Schema.optional(Schema.String),
  /** For a goal of a cluster: the id of the shared volume its workspace is on. */
  volume: Schema.optional(Schema.String),
  /** The shell's sandbox. */
  sandbox: Schema.optional(Schema.Literal("auto", "bwrap", "none")),
  /** An OpenAI-compatible server's API root, without user or password. */
  baseUrl: Schema.optional(Schema.String),
  /** A GGUF file run inside the process instead of a server, absolute, and how it runs. */
  modelFile: Schema.optional(Schema.String),
  threads: Schema.optional(Count),
  context: Schema.optional(Count),
  seed: Schema.optional(Count),
  /** The model's name. */
  model: Schema.optional(Schema.String),
  mode: Schema.optional(Schema.Literal("tools", "json")),
  temperature: Schema.optional(Schema.Number),
  maxOutputTokens: Schema.optional(Count),
  /** Private hosts, addresses or ranges `http_fetch` may reach. */
  httpAllow: Schema.optional(Schema.Array(Schema.String)),
  /** The built-in tools offered, when not all of them. */
  tools: Schema.optional(Schema.Array(Schema.String)),
  /** The MCP servers started for the goal, as `@rx/mcp`'s `Servers.Server` encodes each (no variable's value). */
  mcp: Schema.optional(Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown }))),
  /** Tools the MCP servers listed that were not offered, and why. */
  mcpLeftOut: Schema.optional(Schema.Array(Schema.Unknown))
})
export type Settings = typeof Settings.Type

/** The fields, in their order. */
export const keys = Object.keys(Settings.fields) as ReadonlyArray<keyof Settings>

const isSettings = Schema.is(Settings)
const isKey = (key: string): key is keyof Settings => keys.some((k) => k === key)

/**
 * Split the metadata an older rx recorded: each key of `Settings` whose value it can hold moves to
 * the settings; everything else (a key a library user chose, a value of another shape) stays.
 */
export const fromMetadata = (
  metadata: Readonly<Record<string, unknown>>
): { readonly settings: Settings | undefined; readonly metadata: Readonly<Record<string, unknown>> } => {
  const settings: Record<string, unknown> = {}
  const rest: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(metadata)) {
    if (isKey(key) && value !== undefined && isSettings({ [key]: value })) settings[key] = value
    else rest[key] = value
  }
  return { settings: Object.keys(settings).length === 0 ? undefined : (settings as Settings), metadata: rest }
}
