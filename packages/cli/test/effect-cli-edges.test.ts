/**
 * What @effect/cli 0.77's parser does with the command lines `rx` must refuse or read otherwise:
 * the reproduction of why `Cli.main` checks a command line before handing it over, and why rx
 * prints its own help. Each case is @effect/cli alone (no rx code); when an upgrade changes one,
 * this fails, and the check in `Cli.ts` it justifies can go.
 */
import { Args, CliConfig, Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Either, Layer } from "effect"

const model = Options.text("model").pipe(Options.withDescription("model name"), Options.optional)
const json = Options.boolean("json").pipe(Options.withDescription("json"))
const goal = Args.text({ name: "goal" }).pipe(Args.withDescription("the goal"), Args.optional)

/** What the handler was given, or how the parse failed (its first line). */
const parse = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    let seen = ""
    const run = Command.make("run", { model, json, goal }, (a) => Effect.sync(() => {
      seen = JSON.stringify(a)
    }))
    const list = Command.make("list", { json }, (a) => Effect.sync(() => {
      seen = JSON.stringify(a)
    }))
    const rx = Command.make("rx").pipe(Command.withSubcommands([run, list]))
    const quiet: Console.Console = { ...(yield* Effect.console), error: () => Effect.void, log: () => Effect.void }
    const outcome = yield* Command.run(rx, { name: "rx", version: "0" })(["node", "rx", ...argv]).pipe(
      Effect.withConsole(quiet),
      Effect.either
    )
    if (Either.isRight(outcome)) return `ok ${seen}`
    const error = outcome.left
    return ValidationError.isValidationError(error) ? `refused: ${HelpDoc.toAnsiText(error.error).replace(/\u001b\[[0-9;]*m/g, "").trim().split("\n")[0]}` : `failed: ${String(error)}`
  }).pipe(Effect.provide(Layer.mergeAll(NodeContext.layer, CliConfig.layer({ showBuiltIns: false, isCaseSensitive: true }))))

describe("@effect/cli 0.77 on the command lines rx checks itself", () => {
  it.effect("an unknown flag before the goal is taken as the goal", () =>
    Effect.map(parse(["run", "--frobnicate", "hi"]), (result) => expect(result).toBe("refused: Received unknown argument: 'hi'")))

  it.effect("a flag that lacks its value takes the next flag as its value", () =>
    Effect.map(parse(["run", "--model", "--json", "hi"]), (result) => expect(result).toContain('"model":{"_id":"Option","_tag":"Some","value":"--json"}')))

  it.effect("a switch given a value, --json=yes, is accepted", () =>
    Effect.map(parse(["list", "--json=yes"]), (result) => expect(result).toBe('ok {"json":true}')))

  it.effect("flags after an argument `-` are not read", () =>
    Effect.map(parse(["run", "-", "--json"]), (result) => expect(result).toMatch(/^refused: .*--json/)))

  it.effect("an unknown command gets no suggestion", () =>
    Effect.map(parse(["lst"]), (result) => expect(result).not.toMatch(/did you mean/i)))
})
