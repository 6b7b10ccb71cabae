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

export const Server = Schema.Union(
  Schema.Struct({
    name: Name,
    /** The program and its arguments, started over stdio in the run's sandbox, stopped with the run. */
    command: Schema.NonEmptyArray(Schema.String)
  }),
  Schema.Struct({
    name: Name,
    /** A streamable HTTP endpoint (SSE where the server speaks only that). */
    url: HttpUrl
  })
).annotations({ identifier: "McpServer" })
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
