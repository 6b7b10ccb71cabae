/**
 * The `rx` commands on @effect/cli. `commands` is the typed tree: one `Command.make` per
 * declaration of `Usage` (its settings generated from `Settings.table`, each decoded by the
 * setting's Schema; its own typed flags; its argument), whose handler is the command's body in
 * `Commands`. `line` runs a command line as `rx` does: checked first for what @effect/cli 0.77
 * misreads, parsed by `commands`, each refusal and error said as one line `rx: ...` on stderr,
 * the exit code set in `ExitStatus`. `command` mounts rx in another @effect/cli application:
 * `myapp rx ...` is handed to `line`, so it parses, refuses, helps and exits exactly as `rx`.
 */
import { Args, CliConfig, Command, HelpDoc, ValidationError } from "@effect/cli"
import type { Terminal } from "@effect/platform"
import * as Settings from "@rx/host/Settings"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Array as Arr, Cause, Console, Effect, Either, Exit, Fiber, Layer, Option, Ref } from "effect"
import * as Commands from "./Commands.js"
import * as ExitCode from "./ExitCode.js"
import { ExitStatus, setExit } from "./internal/goal.js"
import { listener } from "./internal/interrupt.js"
import * as Output from "./internal/output.js"
import * as Render from "./Render.js"
import * as Usage from "./Usage.js"

/** A usage problem: printed as `rx: <message>`, exit 1. */
const UsageError = Commands.UsageError

/** The console `line` muted while @effect/cli parses, by the muted one: a command prints with it again. */
const muted = new WeakMap<Console.Console, Console.Console>()

/** A declared command with its body: its settings and flags typed @effect/cli options. */
const make = <const D extends Usage.Doc>(doc: D, body: (input: Usage.Input<D>) => Effect.Effect<void, unknown, Commands.Env>) =>
  Command.make(
    doc.name,
    {
      settings: Usage.settings(doc.settings),
      flags: Usage.all(Object.fromEntries(Object.entries(doc.flags).map(([key, f]) => [key, f.option]))),
      arg: Usage.argument(doc),
      more: Usage.second(doc)
    },
    ({ arg, flags, more, settings }) =>
      Effect.consoleWith((console) => Effect.withConsole(body({ ...flags, settings, arg, more } as Usage.Input<D>), muted.get(console) ?? console))
  ).pipe(Command.withDescription(doc.summary))

/** `rx` and its commands, typed; alone, `rx` prints its help. */
export const commands = Command.make("rx", {}, () => Console.log(Usage.help(style()))).pipe(
  Command.withDescription("an autonomous agent kernel: goals in, a recorded log of every step out"),
  Command.withSubcommands([
    make(Usage.run, Commands.run),
    make(Usage.resume, Commands.resume),
    make(Usage.approve, Commands.approve),
    make(Usage.deny, Commands.deny),
    make(Usage.replay, Commands.replay),
    make(Usage.inspect, Commands.inspect),
    make(Usage.events, Commands.events),
    make(Usage.list, Commands.list),
    make(Usage.cancel, Commands.cancel),
    make(Usage.say, Commands.sayTo),
    make(Usage.doctor, Commands.doctor),
    make(Usage.fork, Commands.fork),
    make(Usage.evaluate, Commands.evaluate),
    make(Usage.config, Commands.config),
    make(Usage.serve, Commands.serve),
    make(Usage.worker, Commands.worker),
    make(Usage.demo, Commands.demo)
  ])
)

/**
 * How rx configures @effect/cli: names as typed (case-sensitive), and no built-in option
 * (--wizard, --completions, --log-level) in any help.
 */
export const config = CliConfig.layer({ isCaseSensitive: true, showBuiltIns: false, showTypes: false, finalCheckBuiltIn: false })

/** The help as `rx` prints it: bold headings only on a terminal that allows colour. */
const style = (): Usage.Style => ({ bold: Output.color() })

/** What a command line asks: print a help or the version, or hand @effect/cli these arguments. */
type Checked =
  | { readonly _tag: "Print"; readonly text: string }
  | { readonly _tag: "Parse"; readonly args: ReadonlyArray<string>; readonly doc?: Usage.Doc; readonly positionals?: ReadonlyArray<string> }

const help = (doc: Usage.Doc | undefined): Checked => ({ _tag: "Print", text: doc === undefined ? Usage.help(style()) : Usage.commandHelp(doc, style()) })

/**
 * The command line checked for what @effect/cli's parser gets wrong: it takes an unknown
 * `--flag` for the argument, the next flag for a missing value, `--json=yes` and a following
 * `yes` as a switch's value, and after an argument starting with `-` (`rx run - --json`) it
 * stops reading flags. So each flag is checked against the command's, and @effect/cli is handed
 * the flags first and the arguments after `--`. `--help` anywhere prints rx's own help.
 */
const check = (argv: ReadonlyArray<string>): Either.Either<Checked, string> => {
  const [first, ...rest] = argv
  if (first === undefined || first === "--help" || first === "-h") return Either.right(help(undefined))
  if (first === "help") return Either.right(help(Usage.doc(rest[0] ?? "")))
  if (first === "--version" || first === "-V") return Either.right({ _tag: "Print", text: `rx ${Usage.version}` })
  if (first.startsWith("-")) return Either.left(`${first}: flags come after the command, as in rx run --model NAME "<goal>" (rx --help lists the commands)`)
  const doc = Usage.doc(first)
  // An unknown command: @effect/cli refuses it.
  if (doc === undefined) return Either.right({ _tag: "Parse", args: argv })
  const known = Usage.accepted(doc)
  const flags: Array<string> = []
  const positionals: Array<string> = []
  for (let i = 0; i < rest.length; i++) {
    const token = rest[i] ?? ""
    if (token === "--") {
      positionals.push(...rest.slice(i + 1))
      break
    }
    if (token === "--help" || token === "-h") return Either.right(help(doc))
    if (token === "-" || !token.startsWith("-")) {
      positionals.push(token)
      continue
    }
    const [name = "", value] = token.slice(2).split(/=(.*)/s)
    const flag = token.startsWith("--") ? known.find((f) => f.flag === name) : undefined
    if (flag === undefined) {
      const typed = token.startsWith("--") ? `--${name}` : token
      return Either.left(`rx ${doc.name} has no flag ${typed}${Settings.suggest(typed, known.map((f) => `--${f.flag}`))} (rx ${doc.name} --help lists its flags)`)
    }
    if (flag.placeholder === "") {
      if (value !== undefined) return Either.left(`--${name} takes no value (got ${token})`)
      flags.push(token)
      continue
    }
    const given = value ?? rest[i + 1]
    if (given === undefined || (value === undefined && given.startsWith("--") && given.length > 2)) {
      return Either.left(`--${name} needs a value: --${name} ${flag.placeholder}`)
    }
    if (value === undefined) i++
    // `--reason=--`: a value `--` on its own would end the flags.
    flags.push(...(given === "--" ? [`--${name}=--`] : [`--${name}`, given]))
  }
  return Either.right({ _tag: "Parse", doc, positionals, args: [first, ...flags, ...(positionals.length === 0 ? [] : ["--", ...positionals])] })
}

/** @effect/cli's refusal of a checked line, as rx says it. */
const explain = (line: Extract<Checked, { _tag: "Parse" }>, error: ValidationError.ValidationError) => {
  const { args, doc, positionals = [] } = line
  const arg = doc?.arg
  const first = HelpDoc.toAnsiText(error.error).replace(/\u001b\[[0-9;]*m/g, "").trim().split("\n")[0] ?? ""
  return new UsageError({
    message: doc === undefined
      ? `there is no command ${JSON.stringify(args[0])}${Settings.suggest(args[0] ?? "", Usage.docs.map((d) => d.name))} (rx --help lists the commands)`
      : positionals.length > (arg === undefined ? 0 : arg.repeated === true ? Infinity : doc.more === undefined ? 1 : 2)
      ? arg === undefined
        ? `rx ${doc.name} takes no arguments (got ${JSON.stringify(positionals[0])}; rx ${doc.name} --help)`
        : doc.name === "run"
        ? "rx run takes one goal: put it in quotes (rx run \"fix the failing test\"), or use --goal-file FILE"
        : `rx ${doc.name} takes one ${arg.name} (got ${positionals.length}: ${positionals.map((a) => JSON.stringify(a)).join(" ")})`
      : arg !== undefined && doc.more !== undefined && positionals.length === 1 && ValidationError.isMissingValue(error)
      ? `rx ${doc.name} needs a ${doc.more.name}: rx ${doc.name} <${arg.name}> "<${doc.more.name}>"`
      : arg !== undefined && ValidationError.isMissingValue(error)
      ? `rx ${doc.name} needs a ${arg.name}: rx ${doc.name} <${arg.name}>${arg.name === "goal-id" ? " (rx list shows the goals)" : ""}`
      // A flag's value refused by its Schema says so itself: `--flag: expected ..., got ...`.
      : first.startsWith("--")
      ? first
      : `rx ${doc.name}: ${first} (rx ${doc.name} --help)`
  })
}

/** One line a user can act on; the details with RX_DEBUG=1. */
const describe = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    return typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" ? error.message : String(error)
  }
  const defect = Cause.squash(cause)
  return `internal error: ${defect instanceof Error ? defect.message : String(defect)} (RX_DEBUG=1 shows the details)`
}

/** The command line parsed by the typed commands and run; @effect/cli's own report of a refusal is muted, said by `explain`. */
const parse = (line: Extract<Checked, { _tag: "Parse" }>) =>
  Effect.consoleWith((console) => {
    const quiet: Console.Console = { ...console, error: () => Effect.void }
    muted.set(quiet, console)
    return Command.run(commands, { name: "rx", version: Usage.version })(["node", "rx", ...line.args]).pipe(
      Effect.withConsole(quiet),
      Effect.catchIf(ValidationError.isValidationError, (error) => explain(line, error)),
      Effect.provide(config)
    )
  })

/**
 * A command line (the arguments after `rx`) run as `rx` runs it: rx's help or version, or the
 * command. Every refusal or failure is said as one line `rx: <message>` on stderr (the details
 * with RX_DEBUG=1) and sets the exit code 1; a command's outcome sets its own code (`ExitCode`).
 * Only an interruption is left to the caller.
 */
export const line = (args: ReadonlyArray<string>): Effect.Effect<void, never, Commands.Env | Terminal.Terminal> => {
  const checked = check(args)
  const run: Effect.Effect<void, unknown, Commands.Env | Terminal.Terminal> = Either.isLeft(checked)
    ? new UsageError({ message: checked.left })
    : checked.right._tag === "Print"
    ? Console.log(checked.right.text)
    : parse(checked.right)
  return run.pipe(
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.interrupt : Effect.gen(function*() {
        yield* Console.error(`rx: ${Render.terminal(Render.cap(describe(cause), 4_000))}`)
        if (process.env["RX_DEBUG"] === "1") yield* Console.error(Cause.pretty(cause))
        yield* setExit(ExitCode.failure)
      })
    )
  )
}

const rest = Args.text({ name: "args" }).pipe(Args.repeated)

/** rx's own arguments, before a command name (`myapp rx --model m run`): said back to `line`, which refuses them as `rx` does. */
const passthrough = Command.make("rx", { args: rest }, ({ args }) => line(args))

/**
 * rx as a command of another @effect/cli application: `Command.withSubcommands([..., Cli.command])`
 * with `Commands.ExitStatus` provided. `myapp rx <anything>` is `rx <anything>`: the same help,
 * the same one-line refusals, the exit code rx would end with left in `ExitStatus` (see `ExitCode`).
 * Each rx command is a subcommand here too, so `myapp rx run --help` shows rx's help of run.
 */
export const command = passthrough.pipe(
  Command.withDescription(HelpDoc.p(Usage.help({ bold: false }))),
  Command.withSubcommands(Arr.map(Usage.docs, (doc) =>
    Command.make(doc.name, { args: rest }, ({ args }) => Effect.flatMap(passthrough, (above) => line([...above.args, doc.name, ...args]))).pipe(
      Command.withDescription(HelpDoc.p(Usage.commandHelp(doc, { bold: false })))
    )))
)

/** The `rx` binary for `process.argv`. */
export const main = (argv: ReadonlyArray<string>) => line(argv.slice(2))

/**
 * Run a program of rx's commands as a process, as the `rx` binary does: `Cli.main(process.argv)`,
 * or an application's `Command.run(myapp, ...)(process.argv)` that mounts `command`. It provides
 * Node's context and `ExitStatus`, routes Ctrl-C as rx does (the first cancels a running goal,
 * recorded; a second stops at once, exit 130), and exits with the code rx's command set
 * (`ExitCode`), or 1 for a failure of the program's own (a refusal @effect/cli printed already, or
 * one line `<name>: <message>`).
 */
export const runMain = <E>(
  program: Effect.Effect<void, E, Commands.Env | NodeContext.NodeContext>,
  options: { readonly name?: string; readonly layer?: Layer.Layer<never, unknown> } = {}
): void => {
  const status = Ref.unsafeMake(0)
  const fiber = Effect.runFork(program.pipe(
    Effect.provide(Layer.mergeAll(NodeContext.layer, Layer.succeed(ExitStatus, status), Output.layer)),
    Effect.provide(options.layer ?? Layer.empty)
  ))
  process.on("SIGINT", listener(() => Effect.runFork(Fiber.interrupt(fiber))))
  fiber.addObserver((exit) => {
    // What the program abandoned (a connection attempt nothing can cancel) does not keep the
    // process alive; what it wrote is not cut (where stdout is asynchronous the exit waits for it).
    const exitOnceWritten = (): void => {
      if (process.stdout.writableLength === 0 && process.stderr.writableLength === 0) return process.exit()
      setTimeout(exitOnceWritten, 50).unref()
    }
    setTimeout(exitOnceWritten, 1_000).unref()
    if (Exit.isSuccess(exit)) {
      process.exitCode = Ref.get(status).pipe(Effect.runSync)
      return
    }
    const interrupted = Cause.isInterruptedOnly(exit.cause)
    const failure = Cause.failureOption(exit.cause)
    if (!(Option.isSome(failure) && ValidationError.isValidationError(failure.value))) {
      Output.err(`${options.name ?? "rx"}: ${interrupted ? "interrupted" : describe(exit.cause)}\n`)
    }
    process.exitCode = interrupted ? ExitCode.interrupted : ExitCode.failure
  })
}
