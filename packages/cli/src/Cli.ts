/**
 * The `rx` commands on @effect/cli: one `Command` per spec of `Usage` (its settings from
 * `Settings.table`, its own flags, its argument, each described), whose handler calls the
 * command's body in `Commands`. An Effect application mounts `command` as a subcommand of its
 * own (`Command.withSubcommands([..., Cli.command])`, with `Commands.ExitStatus` provided: the
 * exit code rx would end with); `main` is the `rx` binary around it.
 */
import { Args, CliConfig, Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Array as Arr, Console, Effect, Either, Option } from "effect"
import * as Commands from "./Commands.js"
import * as Output from "./internal/output.js"
import * as Settings from "@rx/host/Settings"
import * as Usage from "./Usage.js"

/** A flag as an option: a switch, a text (optional), or a text given as often as wanted. */
const option = (f: Usage.Flag) => {
  const text = Options.text(f.flag).pipe(Options.withPseudoName(f.placeholder), Options.withDescription(f.description))
  return f.placeholder === ""
    ? Options.boolean(f.flag).pipe(Options.withDescription(f.description))
    : f.repeatable === true
    ? Options.repeated(text)
    : Options.optional(text)
}

/** The command's argument, if it takes one. */
const argument = (spec: Usage.Spec): Args.Args<Option.Option<string>> => {
  if (spec.arg === undefined) return Args.map(Args.none, () => Option.none())
  const arg = Args.text({ name: spec.arg.name }).pipe(Args.withDescription(spec.arg.description))
  return spec.arg.optional === true ? Args.optional(arg) : Args.map(arg, Option.some)
}

/** The command's second argument, if it takes one. */
const more = (spec: Usage.Spec): Args.Args<Option.Option<string>> =>
  spec.more === undefined ? Args.map(Args.none, () => Option.none()) : Args.map(Args.text({ name: spec.more.name }).pipe(Args.withDescription(spec.more.description)), Option.some)

/** The console `main` muted while @effect/cli parses, by the muted one: a command prints with it again. */
const muted = new WeakMap<Console.Console, Console.Console>()

const make = (spec: Usage.Spec) =>
  Command.make(
    spec.name,
    { options: Object.fromEntries(Usage.accepted(spec).map((f) => [f.flag, option(f)])), arg: Args.all([argument(spec), more(spec)]) },
    ({ arg: [arg, second], options }) => {
      const body = Commands.commands[spec.name]
      if (body === undefined) return new Commands.UsageError({ message: `there is no command ${spec.name}` })
      const flags = Commands.flagsOf(spec, { options, arg, more: second })
      return Effect.consoleWith((console) => Effect.withConsole(body(flags), muted.get(console) ?? console))
    }
  ).pipe(Command.withDescription(spec.summary))

/** The help as `rx` prints it: bold headings only on a terminal that allows colour. */
const style = (): Usage.Style => ({ bold: Output.color() })

/** `rx` and its commands; alone, `rx` prints its help. */
export const command = Command.make("rx", {}, () => Console.log(Usage.help(style()))).pipe(
  Command.withDescription("an autonomous agent kernel: goals in, a recorded log of every step out"),
  Command.withSubcommands(Arr.map(Usage.specs, make))
)

/**
 * How the binary configures @effect/cli: names as typed (case-sensitive), and no built-in
 * option (--wizard, --completions, --log-level) in any help.
 */
export const config = CliConfig.layer({ isCaseSensitive: true, showBuiltIns: false, showTypes: false, finalCheckBuiltIn: false })

/** What `main` does with a command line: print a help or the version, or hand @effect/cli these arguments. */
type Checked =
  | { readonly _tag: "Print"; readonly text: string }
  | { readonly _tag: "Parse"; readonly args: ReadonlyArray<string>; readonly spec?: Usage.Spec; readonly positionals?: ReadonlyArray<string> }

const help = (spec: Usage.Spec | undefined): Checked => ({ _tag: "Print", text: spec === undefined ? Usage.help(style()) : Usage.commandHelp(spec, style()) })

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
  if (first === "help") return Either.right(help(Usage.spec(rest[0] ?? "")))
  if (first === "--version" || first === "-V") return Either.right({ _tag: "Print", text: `rx ${Usage.version}` })
  if (first.startsWith("-")) return Either.left(`${first}: flags come after the command, as in rx run --model NAME "<goal>" (rx --help lists the commands)`)
  const spec = Usage.spec(first)
  // An unknown command: @effect/cli refuses it.
  if (spec === undefined) return Either.right({ _tag: "Parse", args: argv })
  const known = Usage.accepted(spec)
  const flags: Array<string> = []
  const positionals: Array<string> = []
  for (let i = 0; i < rest.length; i++) {
    const token = rest[i] ?? ""
    if (token === "--") {
      positionals.push(...rest.slice(i + 1))
      break
    }
    if (token === "--help" || token === "-h") return Either.right(help(spec))
    if (token === "-" || !token.startsWith("-")) {
      positionals.push(token)
      continue
    }
    const [name = "", value] = token.slice(2).split(/=(.*)/s)
    const flag = token.startsWith("--") ? known.find((f) => f.flag === name) : undefined
    if (flag === undefined) {
      const typed = token.startsWith("--") ? `--${name}` : token
      return Either.left(`rx ${spec.name} has no flag ${typed}${Settings.suggest(typed, known.map((f) => `--${f.flag}`))} (rx ${spec.name} --help lists its flags)`)
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
  return Either.right({ _tag: "Parse", spec, positionals, args: [first, ...flags, ...(positionals.length === 0 ? [] : ["--", ...positionals])] })
}

/**
 * The `rx` binary for `process.argv`: rx's help or version (`rx <version>`, one line), or the
 * command line parsed by @effect/cli and run, each refusal of it said as one line.
 */
export const main = (argv: ReadonlyArray<string>) => {
  const checked = check(argv.slice(2))
  if (Either.isLeft(checked)) return new Commands.UsageError({ message: checked.left })
  const line = checked.right
  if (line._tag === "Print") return Console.log(line.text)
  const { args, positionals = [], spec } = line
  const arg = spec?.arg
  const explain = (error: ValidationError.ValidationError) =>
    new Commands.UsageError({
      message: spec === undefined
        ? `there is no command ${JSON.stringify(args[0])}${Settings.suggest(args[0] ?? "", Usage.specs.map((s) => s.name))} (rx --help lists the commands)`
        : positionals.length > (arg === undefined ? 0 : spec.more === undefined ? 1 : 2)
        ? arg === undefined
          ? `rx ${spec.name} takes no arguments (got ${JSON.stringify(positionals[0])}; rx ${spec.name} --help)`
          : spec.name === "run"
          ? "rx run takes one goal: put it in quotes (rx run \"fix the failing test\"), or use --goal-file FILE"
          : `rx ${spec.name} takes one ${arg.name} (got ${positionals.length}: ${positionals.map((a) => JSON.stringify(a)).join(" ")})`
        : arg !== undefined && spec.more !== undefined && positionals.length === 1 && ValidationError.isMissingValue(error)
        ? `rx ${spec.name} needs a ${spec.more.name}: rx ${spec.name} <${arg.name}> "<${spec.more.name}>"`
        : arg !== undefined && ValidationError.isMissingValue(error)
        ? `rx ${spec.name} needs a ${arg.name}: rx ${spec.name} <${arg.name}>${arg.name === "goal-id" ? " (rx list shows the goals)" : ""}`
        : `rx ${spec.name}: ${HelpDoc.toAnsiText(error.error).replace(/\u001b\[[0-9;]*m/g, "").trim().split("\n")[0]} (rx ${spec.name} --help)`
    })
  // @effect/cli prints its own report of a refused line on stderr: muted here, said by `explain`.
  return Effect.consoleWith((console) => {
    const quiet: Console.Console = { ...console, error: () => Effect.void }
    muted.set(quiet, console)
    return Command.run(command, { name: "rx", version: Usage.version })(["node", "rx", ...args]).pipe(
      Effect.withConsole(quiet),
      Effect.catchIf(ValidationError.isValidationError, explain)
    )
  })
}
