/**
 * Approvals at a terminal: a person sees the exact call a goal waits on and answers y (run it),
 * n (deny it, with an optional reason the model is told) or a (always: this tool runs without
 * asking from now on, recorded as an options change). Decisions are recorded as by `terminal`.
 */
import type { Runner, State } from "@rx/kernel"
import { Effect, Option, type Scope } from "effect"
import * as readline from "node:readline"
import * as Render from "./Render.js"

/** Who a decision made at the terminal is recorded as. */
export const by = "terminal"

/** A conversation with the person at the terminal. */
export interface Terminal {
  readonly write: (text: string) => Effect.Effect<void>
  /** The next line typed, or `None` at the end of input (Ctrl-D). */
  readonly line: Effect.Effect<Option.Option<string>>
}

/** What an answer means; `undefined` for anything else. */
export type Answer = "yes" | "no" | "always"

export const parse = (line: string): Answer | undefined => {
  switch (line.trim().toLowerCase()) {
    case "y":
    case "yes":
      return "yes"
    case "n":
    case "no":
      return "no"
    case "a":
    case "always":
      return "always"
    default:
      return undefined
  }
}

const alwaysReason = (tool: string) => `approved at the terminal; ${tool} always allowed from now on`

/**
 * The call as the person sees it: exactly what will run (tool and input), escaped; a call longer
 * than `Render.decisionLimit` says how much is not shown and the command that shows it (`whole`).
 */
export const describe = (request: State.Awaiting, whole = "rx events"): string => {
  const [head, ...input] = Render.callView(request.tool, request.input, whole)
  return [`approval needed: call ${Render.terminal(request.callId)} wants to run ${head ?? ""}`, ...input].join("\n")
}

const question = (tool: string) => Render.terminal(`run it? y = yes, n = no, a = always allow ${tool} in this goal: `)

/**
 * The approver hook for a run with a person at the terminal. `open` gives a terminal for one
 * request (closed after it); `always(tool, goalId)` records that the tool runs without asking
 * from now on in the goal that asks (its approval policy, so later calls are not asked about);
 * `whole(request, goalId)` is the command that shows a call too long to show here. At the end of input the
 * answer is `None`: the goal suspends, to be decided with `rx approve` or `rx deny`.
 */
export const approver = <E>(
  open: Effect.Effect<Terminal, E, Scope.Scope>,
  always: (tool: string, goalId: string) => Effect.Effect<void>,
  whole?: (request: State.Awaiting, goalId: string) => string
): Runner.Approver => {
  const yes = (reason: string): Option.Option<Runner.Decision> => Option.some({ approved: true, reason, by })
  return (request, goalId) =>
    Effect.scoped(Effect.gen(function*() {
      const terminal = yield* open
      yield* terminal.write(`${describe(request, whole?.(request, goalId))}\n`)
      while (true) {
        yield* terminal.write(question(request.tool))
        const line = yield* terminal.line
        if (Option.isNone(line)) {
          yield* terminal.write("\nno answer: the goal waits for a decision\n")
          return Option.none()
        }
        const answer = parse(line.value)
        if (answer === "yes") return yes("approved at the terminal")
        if (answer === "always") {
          yield* always(request.tool, goalId)
          return yes(alwaysReason(request.tool))
        }
        if (answer === "no") {
          yield* terminal.write("why? (the model is told; Enter for no reason): ")
          const why = Option.getOrElse(yield* terminal.line, () => "").trim()
          return Option.some({ approved: false, reason: why === "" ? "denied at the terminal" : why, by })
        }
        yield* terminal.write("please answer y, n or a\n")
      }
    }).pipe(Effect.orElseSucceed(() => Option.none())))
}

/**
 * The process's terminal for one request: lines of stdin (cooked mode, so Ctrl-C stays a
 * signal), prompts on stdout. Reading stops when the scope closes, so nothing typed between
 * requests is taken as an answer.
 */
export const stdio: Effect.Effect<Terminal, never, Scope.Scope> = Effect.gen(function*() {
  const lines: Array<string> = []
  let ended = false
  let wake: (() => void) | undefined
  const rl = yield* Effect.acquireRelease(
    Effect.sync(() => readline.createInterface({ input: process.stdin, terminal: false })),
    (rl) => Effect.sync(() => rl.close())
  )
  rl.on("line", (line) => {
    lines.push(line)
    wake?.()
  })
  rl.on("close", () => {
    ended = true
    wake?.()
  })
  const line: Effect.Effect<Option.Option<string>> = Effect.async((resume) => {
    const next = () => {
      const first = lines.shift()
      if (first !== undefined) return resume(Effect.succeed(Option.some(first)))
      if (ended) return resume(Effect.succeed(Option.none()))
      wake = () => {
        wake = undefined
        next()
      }
    }
    next()
    return Effect.sync(() => {
      wake = undefined
    })
  })
  return { write: (text) => Effect.sync(() => void process.stdout.write(text)), line }
})

/** Whether a person can be asked here: stdin and stdout are terminals. */
export const interactive = (): boolean => process.stdin.isTTY === true && process.stdout.isTTY === true
