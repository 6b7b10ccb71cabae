/**
 * Where `rx` writes. stdout holds only what a command prints (with `--json`, only JSON lines);
 * logs, notes and errors go to stderr. A closed pipe (`rx run ... | head`) never stops a run:
 * a stream that fails is marked closed and later writes to it are dropped, so the goal goes on
 * to its end and rx exits quietly.
 */
import { Console, Effect, Layer, Logger, LogLevel } from "effect"
import { format } from "node:util"

interface Stream {
  readonly write: (text: string) => boolean
  readonly on: (event: "error", listener: (error: Error) => void) => unknown
  readonly isTTY?: boolean
}

const closed = new WeakSet<Stream>()

/** Mark a stream closed on its first error (EPIPE and the like) instead of crashing the process. */
const guard = (stream: Stream) => {
  stream.on("error", () => {
    closed.add(stream)
  })
}

/** Write unless the stream failed before. Errors arrive as events; a synchronous one is caught too. */
const write = (stream: Stream, text: string) => {
  if (closed.has(stream)) return
  try {
    stream.write(text)
  } catch {
    closed.add(stream)
  }
}

let status: { readonly clear: () => void; readonly redraw: () => void } | undefined

/**
 * A live status line on stderr (see `Progress`): it is cleared before anything else is written
 * to the terminal and drawn again after, so lines never mix.
 */
export const setStatusLine = (line: typeof status) => {
  status = line
}

const around = (body: () => void) => {
  status?.clear()
  body()
  status?.redraw()
}

/** Text to stdout. */
export const out = (text: string) => around(() => write(process.stdout, text))
/** Text to stderr. */
export const err = (text: string) => around(() => write(process.stderr, text))

/** Whether colour (bold help headings) may be used on stdout: a terminal, and `NO_COLOR` unset or empty. */
export const color = (): boolean => process.stdout.isTTY === true && (process.env["NO_COLOR"] ?? "") === ""

/** Strip terminal escape sequences (for output that may go to a pipe or a file). */
const ansi = /\u001b\[[0-9;?]*[ -/]*[@-~]/g

/** Whether stderr is a terminal (the live status line is drawn only there). */
export const stderrIsTerminal = (): boolean => process.stderr.isTTY === true

const line = (args: ReadonlyArray<unknown>) => `${format(...args)}\n`

/** A `Console` over `out` and `err`; escape sequences (from library help text) only where colour is allowed. */
const console: Console.Console = (() => {
  const plain = (text: string) => (color() ? text : text.replace(ansi, ""))
  const toOut = (...args: ReadonlyArray<unknown>) => Effect.sync(() => out(plain(line(args))))
  const toErr = (...args: ReadonlyArray<unknown>) => Effect.sync(() => err(plain(line(args))))
  const unsafe = globalThis.console
  return {
    [Console.TypeId]: Console.TypeId,
    assert: (condition, ...args) => (condition ? Effect.void : toErr(...args)),
    clear: Effect.void,
    count: () => Effect.void,
    countReset: () => Effect.void,
    debug: toErr,
    dir: (item) => toErr(item),
    dirxml: toErr,
    error: toErr,
    group: () => Effect.void,
    groupEnd: Effect.void,
    info: toErr,
    log: toOut,
    table: (data) => toOut(data),
    time: () => Effect.void,
    timeEnd: () => Effect.void,
    timeLog: () => Effect.void,
    trace: toErr,
    warn: toErr,
    unsafe
  }
})()

/**
 * Logs as one line each on stderr: `rx: warning: ...`. With `RX_DEBUG=1` every level down to
 * debug, with the fiber and annotations; otherwise info and up.
 */
/** A model client's retry warning: the reason, then when the next attempt is. */
const retrying = /^([\s\S]*); (attempt \d+ in [\s\S]*)$/
/** The reason of the last retry warning said, so the next one with the same reason does not say it again. */
let lastRetry: string | undefined

const logger = Logger.make<unknown, void>(({ annotations, fiberId, logLevel, message }) => {
  const said = Array.isArray(message) ? message.map((m) => (typeof m === "string" ? m : format(m))).join(" ") : format(message)
  const retry = logLevel._tag === "Warning" ? retrying.exec(said) : null
  const text = retry === null ? said : retry[1] === lastRetry ? `the same again; ${retry[2]}` : said
  if (retry !== null) lastRetry = retry[1]
  const level = logLevel._tag === "Warning" ? "warning" : logLevel.label.toLowerCase()
  const debug = process.env["RX_DEBUG"] === "1"
  const extra = debug ? ` [${[...fiberIdText(fiberId), ...[...annotations].map(([k, v]) => `${k}=${format(v)}`)].join(" ")}]` : ""
  err(`rx: ${level}: ${text}${extra}\n`)
})

const fiberIdText = (id: unknown) => (typeof id === "object" && id !== null && "id" in id ? [`fiber=#${String(id.id)}`] : [])

/** Install the guards, the Console and the logger for the whole program. */
export const layer: Layer.Layer<never> = Layer.mergeAll(
  Layer.effectDiscard(Effect.sync(() => {
    guard(process.stdout)
    guard(process.stderr)
  })),
  Console.setConsole(console),
  Logger.replace(Logger.defaultLogger, logger),
  Logger.minimumLogLevel(process.env["RX_DEBUG"] === "1" ? LogLevel.Debug : LogLevel.Info)
)
