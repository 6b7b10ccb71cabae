/**
 * Which MCP servers a run uses: a name and either a command (started over stdio) or a URL
 * (streamable HTTP, or SSE where a server speaks only that). As given on a command line,
 * `NAME=COMMAND LINE` or `NAME=URL`.
 */
import { Either, Schema } from "effect"

/** A server's name: its tools reach the model as `NAME__tool`. */
export const Name = Schema.String.pipe(
  Schema.pattern(/^[a-zA-Z0-9-]{1,24}$/, { message: () => "an MCP server's name is 1 to 24 letters, digits or \"-\"" })
)

const HttpUrl = Schema.String.pipe(
  Schema.filter((url) => {
    if (!URL.canParse(url)) return "expected an http:// or https:// URL"
    const protocol = new URL(url).protocol
    return protocol === "http:" || protocol === "https:" || "expected an http:// or https:// URL"
  })
)

/**
 * How a stdio server sandboxed on request runs (bubblewrap): the system folders and `read`
 * read-only, the workspace writable (its protected paths read-only, hidden ones hidden), no home
 * folder, and the network only with `network`.
 */
export const SandboxRequest = Schema.Struct({
  network: Schema.Boolean,
  /** Absolute folders the server may read (its own files, when they live outside the workspace). */
  read: Schema.Array(Schema.String)
})
export type SandboxRequest = typeof SandboxRequest.Type

/** The name of an environment variable. */
export const EnvName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, { message: () => "an environment variable's name is letters, digits and \"_\", not starting with a digit" })
)

export const Stdio = Schema.Struct({
  name: Name,
  /** The program and its arguments, started over stdio as the user (or sandboxed on request), stopped with the run. */
  command: Schema.NonEmptyArray(Schema.String),
  /** Present when the user asked for this server to run in the sandbox. */
  sandbox: Schema.optional(SandboxRequest),
  /** The names of the variables the user passes it; their values are never recorded. */
  env: Schema.optional(Schema.Array(EnvName)),
  /** The user says its tools may run again when a crash cut a call (its own hints are not trusted for that). */
  safeToRepeat: Schema.optional(Schema.Boolean)
})

export const Http = Schema.Struct({
  name: Name,
  /** A streamable HTTP endpoint (SSE where the server speaks only that). */
  url: HttpUrl,
  safeToRepeat: Schema.optional(Schema.Boolean)
})

export const Server = Schema.Union(Stdio, Http).annotations({ identifier: "McpServer" })
export type Server = typeof Server.Type

/**
 * Words of a command line as a POSIX shell splits them, without expanding anything: spaces
 * separate, '...' is literal, "..." allows \" and \\, a backslash outside quotes escapes.
 */
export const words = (line: string): Either.Either<ReadonlyArray<string>, string> => {
  const out: Array<string> = []
  let word = ""
  let started = false
  let quote: "'" | "\"" | undefined
  for (let i = 0; i < line.length; i++) {
    const c = line[i] ?? ""
    if (quote === "'") {
      if (c === "'") quote = undefined
      else word += c
    } else if (quote === "\"") {
      if (c === "\"") quote = undefined
      else if (c === "\\" && (line[i + 1] === "\"" || line[i + 1] === "\\")) word += line[++i] ?? ""
      else word += c
    } else if (c === "'" || c === "\"") {
      quote = c
      started = true
    } else if (c === "\\") {
      word += line[++i] ?? ""
      started = true
    } else if (/\s/.test(c)) {
      if (started) out.push(word)
      word = ""
      started = false
    } else {
      word += c
      started = true
    }
  }
  if (quote !== undefined) return Either.left(`unclosed ${quote} in ${JSON.stringify(line)}`)
  if (started) out.push(word)
  return Either.right(out)
}

/** `NAME=COMMAND LINE` or `NAME=URL`, as one server; `Left` says what is wrong. */
export const parse = (text: string): Either.Either<Server, string> => {
  const at = text.indexOf("=")
  if (at <= 0) return Either.left(`expected NAME=COMMAND or NAME=URL, got ${JSON.stringify(text)}`)
  const name = text.slice(0, at).trim()
  const rest = text.slice(at + 1).trim()
  if (!/^[a-zA-Z0-9-]{1,24}$/.test(name)) return Either.left(`${JSON.stringify(name)}: an MCP server's name is 1 to 24 letters, digits or "-"`)
  if (rest === "") return Either.left(`${name}: give a command or a URL after "="`)
  if (/^https?:\/\//i.test(rest)) {
    return URL.canParse(rest) ? Either.right({ name, url: rest }) : Either.left(`${name}: ${JSON.stringify(rest)} is not a URL`)
  }
  return Either.flatMap(words(rest), (argv) => {
    const [first, ...args] = argv
    return first === undefined ? Either.left(`${name}: give a command or a URL after "="`) : Either.right({ name, command: [first, ...args] })
  })
}

/** How a server is written on a command line (`parse` reads it back). */
export const show = (server: Server): string =>
  `${server.name}=${"url" in server ? server.url : server.command.map((w) => (/^[\w./:@%+=,-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`)).join(" ")}`

/**
 * What the user's config file may say of a server, by its name: variables to pass it (`env`),
 * seconds it may take to start (`startTimeout`, e.g. for a server that downloads itself), to run
 * it in the sandbox (`sandbox`: `true`, or `{ "network": true, "read": ["/folder"] }`), and that
 * its tools are safe to run again after a crash (`safeToRepeat`).
 */
export const Settings = Schema.Struct({
  env: Schema.optional(Schema.Record({ key: EnvName, value: Schema.String })),
  startTimeout: Schema.optional(Schema.Int.pipe(Schema.between(1, 3_600))),
  sandbox: Schema.optional(Schema.Union(
    Schema.Boolean,
    Schema.Struct({ network: Schema.optional(Schema.Boolean), read: Schema.optional(Schema.Array(Schema.String)) })
  )),
  safeToRepeat: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "McpServerSettings" })
export type Settings = typeof Settings.Type
