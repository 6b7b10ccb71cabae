/**
 * The MCP servers of a command line: `--mcp NAME=COMMAND|URL`, `--mcp-env NAME=VAR[=VALUE]` and
 * `--mcp-sandbox NAME[=network]`, with what the user's config file says of each server by name
 * (`mcpServers`), into the servers a goal records and how each is started (never recorded).
 * Light: the MCP SDK is not loaded here.
 */
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import * as os from "node:os"
import { resolve as resolvePath } from "node:path"
import type { Launch } from "./McpTools.js"
import * as Servers from "./Servers.js"

/** A refused flag or config entry, in one line. */
export class FlagError extends Schema.TaggedError<FlagError>()("@rx/mcp/FlagError", { message: Schema.String }) {}

/** What a command line says of MCP servers, each flag as given. */
export interface McpFlags {
  readonly mcp: ReadonlyArray<string>
  readonly mcpEnv: ReadonlyArray<string>
  readonly mcpSandbox: ReadonlyArray<string>
}

/** Each server's settings in the user's config file, by the server's name. */
export type Configured = Readonly<Record<string, Servers.Settings>>

/** A server as a goal records it (with its settings): its variables' names, never their values. */
export const encode = (server: Servers.Server): Readonly<Record<string, unknown>> => Schema.encodeSync(Servers.Server)(server)

/** The servers a goal recorded (`Settings.mcp`); none if it recorded none (or nothing readable). */
export const recorded = (mcp: ReadonlyArray<unknown> | undefined): ReadonlyArray<Servers.Server> =>
  Option.getOrElse(Schema.decodeUnknownOption(Schema.Array(Servers.Server))(mcp ?? []), () => [])

/** `~/x` as a folder of the user's home; other paths as given. */
const expandHome = (folder: string) => (folder === "~" || folder.startsWith("~/") ? `${os.homedir()}${folder.slice(1)}` : folder)

/** `NAME=VALUE` split at its first `=`, or undefined without one. */
const pair = (text: string): readonly [string, string] | undefined => {
  const at = text.indexOf("=")
  return at <= 0 ? undefined : [text.slice(0, at).trim(), text.slice(at + 1)]
}

/**
 * `--mcp NAME=COMMAND|URL`, each given, with what `--mcp-sandbox` and the user's config file
 * say of each: the servers as recorded but for their variables' names, or the first problem.
 */
const servers = (flags: McpFlags, configured: Configured) =>
  Effect.gen(function*() {
    const servers: Array<Servers.Server> = []
    for (const text of flags.mcp) {
      const parsed = Servers.parse(text)
      if (Either.isLeft(parsed)) return yield* new FlagError({ message: `--mcp: ${parsed.left}` })
      if (servers.some((s) => s.name === parsed.right.name)) return yield* new FlagError({ message: `--mcp: two servers are named ${parsed.right.name}` })
      const server = parsed.right
      // `~/` as a shell would expand it, though the line was quoted (`--mcp demo="node ~/tools/demo/server.mjs"`).
      servers.push("command" in server ? { ...server, command: [expandHome(server.command[0]), ...server.command.slice(1).map(expandHome)] } : server)
    }
    const sandboxFlags = new Map<string, boolean>()
    for (const text of flags.mcpSandbox) {
      const [name, option] = pair(text) ?? [text.trim(), undefined]
      if (option !== undefined && option !== "network") return yield* new FlagError({ message: `--mcp-sandbox: expected NAME or NAME=network, got ${JSON.stringify(text)}` })
      const server = servers.find((s) => s.name === name)
      if (server === undefined || !("command" in server)) {
        return yield* new FlagError({ message: `--mcp-sandbox: ${JSON.stringify(name)} is not a server started with a command (--mcp NAME=COMMAND)` })
      }
      sandboxFlags.set(name, option === "network")
    }
    return servers.map((server): Servers.Server => {
      const settings = configured[server.name] ?? {}
      const safe = settings.safeToRepeat === true ? { safeToRepeat: true } : {}
      if (!("command" in server)) return { ...server, ...safe }
      const asked = settings.sandbox === undefined || settings.sandbox === false ? undefined : settings.sandbox === true ? {} : settings.sandbox
      const network = sandboxFlags.get(server.name)
      const sandbox = network === undefined && asked === undefined
        ? undefined
        : { network: network === true || asked?.network === true, read: (asked?.read ?? []).map((folder) => resolvePath(expandHome(folder))) }
      return { ...server, ...(sandbox === undefined ? {} : { sandbox }), ...safe }
    })
  })

/**
 * `--mcp-env NAME=VAR=VALUE` (or `NAME=VAR`, the value from this process's environment), each
 * given, as variables by server; `base` (the config file's) under them.
 */
const variables = (given: ReadonlyArray<string>, servers: ReadonlyArray<Servers.Server>, base: Readonly<Record<string, Readonly<Record<string, string>>>>) =>
  Effect.gen(function*() {
    const env: Record<string, Record<string, string>> = Object.fromEntries(Object.entries(base).map(([name, vars]) => [name, { ...vars }]))
    for (const text of given) {
      const first = pair(text)
      const server = first === undefined ? undefined : servers.find((s) => s.name === first[0])
      if (first === undefined || server === undefined || !("command" in server)) {
        return yield* new FlagError({
          message: `--mcp-env: expected NAME=VAR=VALUE or NAME=VAR, NAME a server started with a command (--mcp NAME=COMMAND), got ${JSON.stringify(text.replace(/=([^=]*)=.*/, "=$1=..."))}`
        })
      }
      const second = pair(first[1])
      const variable = second?.[0] ?? first[1].trim()
      if (Either.isLeft(Schema.decodeUnknownEither(Servers.EnvName)(variable))) {
        return yield* new FlagError({ message: `--mcp-env ${first[0]}: ${JSON.stringify(variable)} is not a variable's name` })
      }
      const value = second?.[1] ?? process.env[variable]
      if (value === undefined) {
        return yield* new FlagError({ message: `--mcp-env ${first[0]}=${variable}: ${variable} is not set in rx's environment (give it as ${first[0]}=${variable}=VALUE)` })
      }
      env[first[0]] = { ...env[first[0]], [variable]: value }
    }
    return env
  })

/**
 * How each server starts: its variables (`--mcp-env` over the config file's `env`) and start
 * timeout (the config file's `startTimeout`). A variable the server was recorded with and not
 * given now is refused: its value is never recorded, so a resume needs it again.
 */
export const launch = (servers: ReadonlyArray<Servers.Server>, given: ReadonlyArray<string>, configured: Configured) =>
  Effect.gen(function*() {
    const fromFile = Object.fromEntries(Object.entries(configured).flatMap(([name, settings]) => (settings.env === undefined ? [] : [[name, settings.env] as const])))
    const env = yield* variables(given, servers, fromFile)
    const launch: Record<string, Launch> = {}
    for (const server of servers) {
      const vars = env[server.name] ?? {}
      const missing = "command" in server ? (server.env ?? []).find((name) => vars[name] === undefined) : undefined
      if (missing !== undefined) {
        return yield* new FlagError({
          message: `MCP server ${server.name} was started with the variable ${missing}, whose value is never recorded: give it again (--mcp-env ${server.name}=${missing}=VALUE, or "env" of ${server.name} in your config file's mcpServers)`
        })
      }
      const startTimeout = configured[server.name]?.startTimeout
      launch[server.name] = {
        env: vars,
        ...(startTimeout === undefined ? {} : { startTimeoutMs: startTimeout * 1_000, startTimeoutFrom: `"startTimeout" of ${server.name} in your config file's mcpServers` })
      }
    }
    return launch
  })

/**
 * The servers of a new goal's flags, how each starts, and what the goal records of them: a server
 * started with a command records the names of its variables (`--mcp-env` and the config file's).
 */
export const given = (flags: McpFlags, configured: Configured) =>
  Effect.gen(function*() {
    const parsed = yield* servers(flags, configured)
    const launched = yield* launch(parsed, flags.mcpEnv, configured)
    const found = parsed.map((server): Servers.Server => {
      const env = Object.keys(launched[server.name]?.env ?? {}).sort()
      return "command" in server && env.length > 0 ? { ...server, env } : server
    })
    return { servers: found, launch: launched, recorded: found.map(encode) }
  })

/**
 * The servers' settings of the user's config file, its `mcpServers` value (`raw`), by name;
 * `key` names that value in a refusal.
 */
export const configured = (file: string, key: string, raw: unknown): Either.Either<Configured, FlagError> =>
  raw === undefined ? Either.right({}) : Either.mapLeft(
    Schema.decodeUnknownEither(Schema.Record({ key: Servers.Name, value: Servers.Settings }))(raw, { onExcessProperty: "error" }),
    (error) => {
      const first = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
      const where = [key, ...(first?.path ?? []).map(String)].join(".")
      return new FlagError({ message: `config file ${file}: ${where}: ${first?.message ?? "is not valid"}` })
    }
  )
